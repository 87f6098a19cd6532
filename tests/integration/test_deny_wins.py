"""A policy deny always wins, at every host: a call the policy denies is denied before anyone
is asked (no pending request, the tool never runs), whatever ``interrupt_on``, a sensitive tool
or ``needs_approval`` says about the same tool; a call the policy allows still waits for the
human they ask for, and runs once approved. And in a user's governance, a plain deny after an
escalating policy wins over the escalation. On real PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import scalar, side_effects
from web.engine import Engine, open_engine
from web.settings import Settings

MODULE = "tests.integration.deny_wins_graphs"
#: Host -> (registered name, message the policy denies, message it allows, the name the
#: policy has in records: ``ApprovalMiddleware(policy=<a loaded Policy>)`` calls it "policy").
HOSTS = {
    "builder": ("deny_wins_builder", "refund 1002", "refund 1001", "policy:deny-wins"),
    "middleware": ("middleware", "refund 1001 42", "refund 1001 25", "policy"),
    "tool_node": ("tool_node", "refund 1001 42", "refund 1001 25", "policy"),
    "openai": ("openai", "refund 1002", "refund 1001", "policy:deny-wins"),
}
GRAPHS = {
    "deny_wins_builder": f"{MODULE}:builder",
    "middleware": f"{MODULE}:middleware",
    "tool_node": f"{MODULE}:tool_node",
    "openai": f"{MODULE}:openai",
    "middleware_escalate_then_deny": f"{MODULE}:middleware_escalate_then_deny",
    "openai_escalate_then_deny": f"{MODULE}:openai_escalate_then_deny",
}


@pytest.fixture
async def hosts(database_url: str, tmp_path: Path) -> Any:
    settings = Settings(
        database_url=database_url, config_file=tmp_path / "none.toml", graphs=GRAPHS
    )
    async with open_engine(database_url, settings) as engine:
        yield engine


def _call_id(message: str) -> str:
    """The id every host's script gives the refund of the order a message names."""
    return f"refund-{message.split()[1]}"


async def _requests_of(engine: Engine, run_id: str) -> int:
    return int(
        await scalar(engine, "SELECT count(*) FROM approval_requests WHERE run_id = %s", run_id)
    )


async def _denied_before_anyone_is_asked(
    engine: Engine, graph: str, message: str, call_id: str, interceptor: str
) -> None:
    out = await engine.runner.start(graph, {"message": message}, principal="alice")
    # Nobody is asked: the run never waits and no request was ever written.
    assert out.status == "completed", out
    assert out.pending == []
    assert await _requests_of(engine, out.run_id) == 0
    assert await side_effects(engine, out.run_id, call_id) == []
    [record] = [
        r
        for r in await engine.audit.interceptions(out.run_id)
        if r["point"] == "pre_tool_call" and r["decision"] == "deny"
    ]
    assert record["interceptor"] == interceptor, record
    assert record["resolved_by"] is None, record
    run = await engine.runs.get(out.run_id)
    assert run is not None
    assert run.answer is not None


async def _waits_then_runs_once_approved(
    engine: Engine, graph: str, message: str, call_id: str
) -> None:
    out = await engine.runner.start(graph, {"message": message}, principal="alice")
    assert out.status == "waiting", out
    [request_id] = out.pending
    request = await engine.requests.get(request_id)
    assert request is not None
    assert request.tool == "issue_refund"
    assert await side_effects(engine, out.run_id, call_id) == []
    await engine.decide_as_operator(request_id, "approve", principal="bob")
    assert await engine.drain() == 1
    run = await engine.runs.get(out.run_id)
    assert run is not None
    assert run.status == "completed", run
    assert len(await side_effects(engine, out.run_id, call_id)) == 1


@pytest.mark.parametrize("host", HOSTS)
async def test_a_call_the_policy_denies_is_denied_without_asking_anyone(
    hosts: Engine, host: str
) -> None:
    graph, denied, _, policy = HOSTS[host]
    await _denied_before_anyone_is_asked(hosts, graph, denied, _call_id(denied), policy)


@pytest.mark.parametrize("host", HOSTS)
async def test_a_call_the_policy_allows_still_waits_for_its_approver(
    hosts: Engine, host: str
) -> None:
    graph, _, allowed, _ = HOSTS[host]
    await _waits_then_runs_once_approved(hosts, graph, allowed, _call_id(allowed))


@pytest.mark.parametrize(
    ("graph", "denied", "allowed"),
    [
        ("middleware_escalate_then_deny", "refund 1001 42", "refund 1001 25"),
        ("openai_escalate_then_deny", "refund 1002", "refund 1001"),
    ],
)
async def test_a_later_plain_deny_wins_over_an_earlier_escalation(
    hosts: Engine, graph: str, denied: str, allowed: str
) -> None:
    await _denied_before_anyone_is_asked(hosts, graph, denied, _call_id(denied), "limit")
    out = await hosts.runner.start(graph, {"message": allowed}, principal="alice")
    [request_id] = out.pending
    request = await hosts.requests.get(request_id)
    assert request is not None
    # The first escalation asks: the policy's, with its approvers, not interrupt_on's.
    assert request.approvers == ("support",)
