"""``approvals runs start --stream``: the run's node updates on stdout as the step produces
them (the events the API streams), then its status."""

from __future__ import annotations

import json

import pytest

from tests.integration.inprocess import invoke
from tests.integration.processes import cli
from web.engine import Engine

pytestmark = pytest.mark.slow


async def test_runs_start_stream_prints_the_runs_events_as_json_lines(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    started = await cli(
        cli_env,
        "runs",
        "start",
        "refund",
        "--input",
        '{"message": "refund 1001"}',
        "--as",
        "cli:alice",
        "--stream",
        "--json",
    )
    assert started.code == 0, started.stderr
    lines = [json.loads(line) for line in started.stdout.splitlines()]
    *updates, status = lines
    assert status["kind"] == "status"
    assert status["status"] == "waiting"
    assert len(status["pending"]) == 1
    # The same updates, in the same order, as the run's stream (GET /api/v1/runs/{id}/events).
    recorded = [
        {"kind": "update", "node": e["node"], **e["data"]}
        for e in await engine.run_events.after(status["run_id"], 0)
        if e["kind"] == "update"
    ]
    assert updates == recorded
    called = [c for u in updates for m in u["messages"] for c in m["tool_calls"]]
    assert called[-1] == "issue_refund"
    assert "1001" not in json.dumps(updates)


async def test_runs_start_stream_prints_each_update_then_the_status_as_text(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    started = await invoke(
        cli_env,
        "runs",
        "start",
        "refund",
        "--input",
        '{"message": "refund 1001"}',
        "--as",
        "cli:alice",
        "--stream",
    )
    assert started.code == 0, started.stderr
    *updates, status = started.stdout.splitlines()
    run = await engine.runs.get(status.split()[1].rstrip(":"))
    assert run is not None
    [request] = await engine.requests.for_run(run.id)
    assert status == f"run {run.id}: waiting (pending: {request.id})"
    recorded = [
        e["node"] for e in await engine.run_events.after(run.id, 0) if e["kind"] == "update"
    ]
    # One line per message (or per node that added none), each naming its node.
    assert [line.split(":")[0] for line in updates] == recorded
    assert updates[-1].endswith("[calls issue_refund]")
