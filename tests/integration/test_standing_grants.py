"""Standing grants ("approve always", "reject always" for the rest of a run), bounded by the
policy rule that escalates the call: on real PostgreSQL, through the OpenAI Agents SDK host with
a scripted model, decided through the engine and resumed in a worker.

A grant lifts only the escalation of the rule that offered it (``allow_always``), for one tool in
one run, within the rule's bounds; a deny still wins; an operator revokes it; every use is
audited; each call still runs once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from agents import Agent, function_tool

from approvals.errors import InvalidDecision, RunNotAllowed
from approvals.policy import parse_policy
from approvals.principals import Principal, Via
from graphs.examples.effects import side_effects as effects_of
from graphs.examples.openai_refund import ScriptedModel
from graphs.hooks.governance import Governance
from graphs.hosts.openai import OpenAIAgent, current_call
from graphs.tool_call.deps import GraphDeps
from tests.integration.helpers import events_of, scalar, verified
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")

HERE = "tests.integration.test_standing_grants"

POLICY = """
policy: grants
default: allow
rules:
  - id: mail-blocked
    point: pre_tool_call
    tool: mail
    when: args.to == "evil"
    action: deny
    priority: 10
  - id: pay-needs-approval
    point: pre_tool_call
    tool: pay
    action: escalate
    allow_always:
      within:
        amount: {max: 100}
  - id: mail-needs-approval
    point: pre_tool_call
    tool: mail
    action: escalate
    allow_always: true
  - id: wire-needs-approval
    point: pre_tool_call
    tool: wire
    action: escalate
"""


def script(text: str, outputs: dict[str, Any]) -> tuple[list[Any], str]:
    """The message names the calls (``pay:50 mail:a``), made one a turn, in order."""
    for index, word in enumerate(text.split()):
        call_id = f"c{index}"
        if call_id not in outputs:
            tool, value = word.split(":")
            args = {"amount": float(value)} if tool == "pay" else {"to": value}
            return [(call_id, tool, args)], ""
    return [], "done"


def build(deps: GraphDeps) -> OpenAIAgent:
    async def record(tool: str, args: dict[str, Any]) -> str:
        call = current_call()
        await effects_of(deps).record(
            run_id=call.run_id, call_id=call.call_id, tool=tool, args=args
        )
        return f"{tool} done"

    @function_tool
    async def pay(amount: float) -> str:
        """Pay an amount."""
        return await record("pay", {"amount": amount})

    @function_tool
    async def mail(to: str) -> str:
        """Send a mail."""
        return await record("mail", {"to": to})

    @function_tool
    async def wire(to: str) -> str:
        """Wire money."""
        return await record("wire", {"to": to})

    agent = Agent(name="granted", model=ScriptedModel(script), tools=[pay, mail, wire])
    governance = Governance(interceptors=[parse_policy(POLICY)], names=["policy:grants"])
    return OpenAIAgent(agent, governance=governance)


async def start(engine: Engine, message: str) -> Any:
    engine.registry._entries["granted"] = f"{HERE}:build"
    return await engine.runner.start("granted", {"message": message}, principal="alice")


async def ran(engine: Engine, run_id: str) -> list[tuple[str, str, Any]]:
    async with engine.connection() as conn:
        rows = await (
            await conn.execute(
                "SELECT call_id, tool, args FROM demo_side_effects WHERE run_id = %s"
                " ORDER BY call_id",
                (run_id,),
            )
        ).fetchall()
    return [(r["call_id"], r["tool"], r["args"]) for r in rows]


async def requests_of(engine: Engine, run_id: str) -> int:
    return int(
        await scalar(engine, "SELECT count(*) FROM approval_requests WHERE run_id = %s", run_id)
    )


async def status(engine: Engine, run_id: str) -> Any:
    run = await engine.runs.get(run_id)
    assert run is not None
    return run


async def pending_of(engine: Engine, run_id: str) -> list[str]:
    return [r.id for r in await engine.requests.for_run(run_id) if r.status == "pending"]


def operator() -> Principal:
    groups = frozenset({"operators"})
    return Principal(id="local:olga", name="olga", groups=groups, via=Via.PASSWORD)


async def test_a_rule_without_allow_always_never_offers_it(engine: Engine) -> None:
    run = await start(engine, "wire:x")
    [request_id] = run.pending
    request = await engine.requests.get(request_id)
    assert request is not None
    assert "allow_always" not in request.shown
    with pytest.raises(InvalidDecision, match="cannot be decided always"):
        await engine.decide_as_operator(request_id, "approve", principal="bob", always=True)
    assert (await engine.requests.get(request_id)).status == "pending"  # type: ignore[union-attr]
    assert await engine.grants_of(run.run_id, by="ops") == []


async def test_approve_always_runs_later_calls_of_the_tool_in_the_run_once_each(
    engine: Engine,
) -> None:
    run = await start(engine, "pay:50 pay:60 pay:70")
    [request_id] = run.pending
    request = await engine.requests.get(request_id)
    assert request is not None
    # The approver sees what "always" would cover.
    assert request.shown["allow_always"] == {
        "rule": "pay-needs-approval",
        "within": {"amount": {"max": 100}},
    }
    decision = await engine.decide_as_operator(request_id, "approve", principal="bob", always=True)
    assert decision.kind == "approve"  # type: ignore[union-attr]
    await engine.drain()
    finished = await status(engine, run.run_id)
    assert finished.status == "completed", finished
    assert await requests_of(engine, run.run_id) == 1
    assert await ran(engine, run.run_id) == [
        ("c0", "pay", {"amount": 50.0}),
        ("c1", "pay", {"amount": 60.0}),
        ("c2", "pay", {"amount": 70.0}),
    ]
    [grant] = await engine.grants_of(run.run_id, by="ops")
    assert (grant.tool, grant.rule, grant.ruling, grant.uses) == (
        "pay",
        "pay-needs-approval",
        "approve",
        2,
    )
    assert grant.granted_by == "bob"
    assert grant.request_id == request_id
    [made] = await events_of(engine, run.run_id, "grant.made")
    assert made["data"]["grant"] == grant.id
    used = await events_of(engine, run.run_id, "grant.used")
    assert [(e["call_id"], e["principal"], e["data"]["grant"]) for e in used] == [
        ("c1", "bob", grant.id),
        ("c2", "bob", grant.id),
    ]
    # Each call the grant decided says so in its interception record.
    records = await scalar(
        engine,
        "SELECT array_agg(reason || ' ' || (record->'verdict'->>'message') ORDER BY sequence)"
        " FROM interception_records WHERE run_id = %s AND reason = 'approved_by_grant'",
        run.run_id,
    )
    said = f"approved by standing grant {grant.id} by bob (request {request_id})"
    assert records == [f"approved_by_grant {said}"] * 2
    await verified(engine)


async def test_a_grant_covers_neither_another_run_nor_another_tool(engine: Engine) -> None:
    run = await start(engine, "pay:50 mail:a")
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob", always=True)
    await engine.drain()
    waiting = await status(engine, run.run_id)
    # Another tool in the same run asks (its own rule offers "always" too; nobody granted it).
    assert waiting.status == "waiting", waiting
    assert await requests_of(engine, run.run_id) == 2
    other = await start(engine, "pay:50")
    assert other.status == "waiting"
    assert await ran(engine, other.run_id) == []
    assert await events_of(engine, other.run_id, "grant.used") == []


async def test_a_call_outside_the_bounds_opens_a_request(engine: Engine) -> None:
    run = await start(engine, "pay:50 pay:500 pay:60")
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob", always=True)
    await engine.drain()
    waiting = await status(engine, run.run_id)
    assert waiting.status == "waiting", waiting
    [request_id] = await pending_of(engine, run.run_id)
    request = await engine.requests.get(request_id)
    assert request is not None
    assert request.shown["args"] == {"amount": 500.0}
    assert await ran(engine, run.run_id) == [("c0", "pay", {"amount": 50.0})]


async def test_a_policy_deny_wins_over_a_grant(engine: Engine) -> None:
    run = await start(engine, "mail:a mail:evil mail:b")
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob", always=True)
    await engine.drain()
    finished = await status(engine, run.run_id)
    assert finished.status == "completed", finished
    assert await ran(engine, run.run_id) == [
        ("c0", "mail", {"to": "a"}),
        ("c2", "mail", {"to": "b"}),
    ]
    used = await events_of(engine, run.run_id, "grant.used")
    assert [e["call_id"] for e in used] == ["c2"]


async def test_an_operators_revocation_makes_the_next_call_ask_again(engine: Engine) -> None:
    run = await start(engine, "pay:50 pay:500 pay:60")
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob", always=True)
    await engine.drain()
    [grant] = await engine.grants_of(run.run_id, by=operator())
    revoked = await engine.revoke_grant(grant.id, by=operator())
    assert revoked.revoked_by == "local:olga"
    assert revoked.revoked_at is not None
    [event] = await events_of(engine, run.run_id, "grant.revoked")
    assert event["principal"] == "local:olga"
    [pending] = await pending_of(engine, run.run_id)
    await engine.decide_as_operator(pending, "approve", principal="bob")
    await engine.drain()
    again = await status(engine, run.run_id)
    # pay:60 is within the bounds, but the grant is revoked: a human is asked.
    assert again.status == "waiting", again
    request = await engine.requests.get((await pending_of(engine, run.run_id))[0])
    assert request is not None
    assert request.shown["args"] == {"amount": 60.0}
    assert await events_of(engine, run.run_id, "grant.used") == []


async def test_reject_always_rejects_later_calls_without_running_them(engine: Engine) -> None:
    run = await start(engine, "pay:50 pay:60")
    await engine.decide_as_operator(
        run.pending[0], "reject", principal="bob", reason="no payments", always=True
    )
    await engine.drain()
    finished = await status(engine, run.run_id)
    assert finished.status == "completed", finished
    assert await ran(engine, run.run_id) == []
    assert await requests_of(engine, run.run_id) == 1
    [used] = await events_of(engine, run.run_id, "grant.used")
    assert used["call_id"] == "c1"
    assert used["data"]["decision"] == "reject"


async def test_someone_who_is_no_operator_cannot_list_or_revoke_grants(engine: Engine) -> None:
    run = await start(engine, "pay:50 pay:500")
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob", always=True)
    await engine.drain()
    [grant] = await engine.grants_of(run.run_id, by="ops")
    # The run's starter may see the run, but a grant is an operator's to take back.
    alice = Principal(id="alice", name="alice", groups=frozenset(), via=Via.PASSWORD)
    with pytest.raises(RunNotAllowed):
        await engine.revoke_grant(grant.id, by=alice)
    with pytest.raises(RunNotAllowed):
        await engine.grants_of(run.run_id, by=alice)
    [still] = await engine.grants_of(run.run_id, by="ops")
    assert still.live


async def test_retention_prunes_a_run_with_its_grants(engine: Engine) -> None:
    run = await start(engine, "pay:50 pay:60")
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob", always=True)
    await engine.drain()
    assert (await status(engine, run.run_id)).status == "completed"
    async with engine.connection() as conn:
        await conn.execute(
            "UPDATE runs SET updated_at = now() - interval '2 days' WHERE id = %s", (run.run_id,)
        )
    await engine.prune(timedelta(days=1), principal="cli:ops")
    assert await engine.runs.get(run.run_id) is None
    grants = "SELECT count(*) FROM standing_grants WHERE run_id = %s"
    uses = "SELECT count(*) FROM standing_grant_uses WHERE run_id = %s"
    assert await scalar(engine, grants, run.run_id) == 0
    assert await scalar(engine, uses, run.run_id) == 0
