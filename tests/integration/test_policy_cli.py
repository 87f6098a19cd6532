"""``approvals policy check`` and ``approvals policy test``: the command, no database.

The database URL points at a closed port, so a command that tried to connect would fail. The
command runs in this process (``tests/integration/inprocess.py``): these are contract checks of
its output and exit codes, which need no process of their own (a child paid ~1 s of imports a
call); ``tests/integration/test_cli.py`` runs the real ``approvals`` script where that matters.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.integration.inprocess import run
from tests.integration.processes import Result

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "graphs" / "examples" / "policies"


@pytest.fixture
def no_database_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPROVALS_")}
    env["APPROVALS_DATABASE_URL"] = "postgresql://nobody@127.0.0.1:1/unreachable"
    return env


def policy_cli(env: dict[str, str], *args: str) -> Result:
    return run(env, "policy", *args)


def test_check_accepts_the_shipped_policy(no_database_env: dict[str, str]) -> None:
    path = EXAMPLES / "refund.yaml"
    result = policy_cli(no_database_env, "check", str(path))
    assert (result.code, result.stderr) == (0, "")
    assert result.stdout == f"{path}: ok (5 rules)\n"

    described = policy_cli(no_database_env, "check", str(path), "--json")
    assert described.code == 0
    listing = described.json()
    assert listing["policy"] == "refund"
    assert listing["points"] == ["post_tool_call", "pre_tool_call"]
    finance = next(r for r in listing["rules"] if r["id"] == "big-refunds-need-finance")
    assert finance["approvers"] == ["finance"]
    assert finance["expires_in_seconds"] == 7200


def test_check_refuses_a_broken_policy_with_its_line(
    no_database_env: dict[str, str], tmp_path: Path
) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "policy: refund\n"
        "default: allow\n"
        "rules:\n"
        "  - id: big-refunds\n"
        "    point: pre_tool_call\n"
        "    when: args.amount >> 100\n"
        "    action: escalate\n"
    )
    result = policy_cli(no_database_env, "check", str(broken))
    assert result.code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        f"error: {broken}:6: rule big-refunds: condition does not compile: <input>:1:"
    )

    as_json = policy_cli(no_database_env, "check", str(broken), "--json")
    assert as_json.code == 2
    assert as_json.json() == {
        "file": str(broken),
        "ok": False,
        "line": 6,
        "reason": as_json.json()["reason"],
    }
    assert as_json.json()["reason"].startswith("rule big-refunds: condition does not compile")


@pytest.mark.parametrize("name", ["refund", "email"])
def test_the_shipped_cases_pass(no_database_env: dict[str, str], name: str) -> None:
    result = policy_cli(
        no_database_env,
        "test",
        str(EXAMPLES / f"{name}.yaml"),
        str(EXAMPLES / f"{name}.cases.yaml"),
    )
    assert result.code == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert all(line.startswith("PASS ") for line in lines[:-1])
    assert lines[-1] == f"{len(lines) - 1} passed, 0 failed"


def test_a_wrong_expectation_fails_the_run(no_database_env: dict[str, str], tmp_path: Path) -> None:
    cases = tmp_path / "wrong.cases.yaml"
    cases.write_text(
        "cases:\n"
        "  - name: small refund goes to support\n"
        "    point: pre_tool_call\n"
        "    tool: issue_refund\n"
        '    args: {order_id: "1001", amount: 20.0, reason: x}\n'
        "    expect: {decision: escalate, rule: refunds-need-support}\n"
        "  - name: big refund goes to support\n"
        "    point: pre_tool_call\n"
        "    tool: issue_refund\n"
        '    args: {order_id: "1002", amount: 120.0, reason: x}\n'
        "    expect: {decision: escalate, rule: refunds-need-support}\n"
    )
    policy = str(EXAMPLES / "refund.yaml")
    result = policy_cli(no_database_env, "test", policy, str(cases))
    assert result.code == 1, result.stderr
    assert result.stdout.splitlines() == [
        "PASS small refund goes to support",
        "FAIL big refund goes to support: expected escalate by refunds-need-support, "
        "got escalate by big-refunds-need-finance (approvers: [finance]; expires in 2h; "
        f"edits allowed) ({cases}:7)",
        "1 passed, 1 failed",
    ]

    as_json = policy_cli(no_database_env, "test", policy, str(cases), "--json")
    assert as_json.code == 1
    report = json.loads(as_json.stdout)
    assert (report["passed"], report["failed"]) == (1, 1)
    assert [c["passed"] for c in report["cases"]] == [True, False]


def test_an_invalid_cases_file_is_refused_with_its_line(
    no_database_env: dict[str, str], tmp_path: Path
) -> None:
    cases = tmp_path / "bad.cases.yaml"
    cases.write_text("cases:\n  - name: a\n    point: input\n    expect: maybe\n")
    result = policy_cli(no_database_env, "test", str(EXAMPLES / "refund.yaml"), str(cases))
    assert result.code == 2
    assert result.stderr == (
        f"error: {cases}:4: case 'a': unknown outcome 'maybe' "
        "(allowed: allow, warn, deny, escalate, transform)\n"
    )
