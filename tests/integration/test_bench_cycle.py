"""The approval-cycle bench (bench/approval_cycle.py), the instrument of the engine's cost
targets, run small, as ``make bench`` runs it (its own process: DBOS is one per process): one
run reports bare LangGraph, the floors (the statements floor too), ours and DBOS side by side
as JSON, and checks that each cycle's tool ran once. No timing is asserted: these machines are
shared and noisy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.approval_cycle import RESUME_PATHS

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--json", "--cycles", "2", "--rounds", "1", "--rounds-c16", "1", "--lanes", "3"]
SMALL += ["--per-lane", "2", "--warmup", "1"]
FLOORS = {"bare", "floor", "floor+emit", "stmts"}


@pytest.mark.parametrize(
    ("resume_path", "variants"),
    [
        pytest.param("inline", {*FLOORS, "ours", "dbos"}, id="inline"),
        pytest.param("workers", {*FLOORS, "ours"}, id="workers"),
    ],
)
def test_one_run_reports_every_variant_and_each_tool_ran_once(
    admin_url: str, resume_path: str, variants: set[str]
) -> None:
    argv = [*SMALL, "--resume-path", resume_path]
    if "dbos" not in variants:
        argv.append("--no-dbos")
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "approval_cycle.py"), *argv],
        env={**os.environ, "APPROVALS_DATABASE_URL": admin_url},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["resume_path"] == RESUME_PATHS[resume_path]
    assert ("version" in report["dbos"]) == ("dbos" in variants), report["dbos"]
    assert [r["concurrency"] for r in report["results"]] == [1, 3]
    for result in report["results"]:
        assert variants <= set(result)
        for variant in variants:
            assert result[variant]["cycles"] == 2 * result["concurrency"]
            assert result[variant]["p50_ms"] > 0
        assert result["ratio"]["p50"] > 0
        assert result["stmts_ratio"]["p50"] > 0
        assert result["ours_over_stmts"]["p50"] > 0
        assert isinstance(result["target_met"], bool)
    checks = report["checks"]
    assert checks["side_effects"] == checks["expected_side_effects"] > 0
    assert checks["tool_ran_once_per_cycle"] is True
    assert checks["jobs_left_queued"] == 0
