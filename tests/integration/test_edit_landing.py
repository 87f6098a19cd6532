"""An approver's edit binds to the rule it lands in (issue 30, items 1 and 2): when that rule would
not have offered the editor approve and edit on a request for the edited arguments (its
``allowed_decisions``, ``allow_edit``, ``redact``, groups, quorum), the editor's decision does
not let the call run. The edit becomes a new request carrying that rule's own offer and
approvers, which the editor may not decide; at decision time (API, CLI) and again when the call
is about to run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from approvals.authz import ApproverRules
from approvals.decisions import decide
from approvals.errors import InvalidDecision, NotAllowed
from approvals.model import PendingCall, RequestStatus, Vote
from approvals.principals import Principal
from approvals.redaction import MARKER
from graphs.tool_call.edits import EditOutcome, recheck_edit
from tests.integration.edit_landing_graphs import GRAPHS
from tests.integration.helpers import side_effects
from tests.integration.inprocess import invoke
from web.engine import Engine
from web.settings import Settings

#: Support edits a 25.00 refund on order 1001 into 980.50 on order 1004.
BIG = {"order_id": "1004", "amount": 980.5, "reason": "customer request"}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"graphs": GRAPHS})


async def _small_refund(engine: Engine, graph: str) -> tuple[str, PendingCall]:
    out = await engine.runner.start(graph, {"message": "refund 1001"}, principal="alice")
    assert out.status == "waiting", out
    request = await engine.requests.get(out.pending[0])
    assert request is not None
    assert request.approvers == ("support",)
    assert request.shown["args"]["amount"] == 25.0
    assert "edit" in request.offered_decisions
    return out.run_id, request


async def _the_new_request(engine: Engine, run_id: str, rule: str) -> PendingCall:
    """The one request the run waits on once the edit was decided: the edited call's, under
    ``rule``, proposed by sue."""
    run = await engine.runs.get(run_id)
    assert run is not None
    assert run.status == "waiting", run
    pending = [r for r in await engine.requests.for_run(run_id) if r.status == "pending"]
    assert len(pending) == 1, pending
    landed = pending[0]
    assert landed.shown.get("rule") == rule
    assert landed.approvers == ("support",)
    assert landed.proposed_by == "local:sue"
    return landed


async def test_an_edit_into_a_rule_that_never_approves_is_a_new_request_and_never_runs(
    engine: Engine,
) -> None:
    run_id, request = await _small_refund(engine, "refund-answer-only")

    decision = await engine.decide_as_operator(
        request.id, "approve", principal="local:sue", args=BIG
    )
    assert not isinstance(decision, Vote)
    assert await engine.worker.drain() == 1

    assert await side_effects(engine, run_id, "refund-1001") == []
    landed = await _the_new_request(engine, run_id, "big-refunds-answer-only")
    assert landed.shown["args"] == BIG
    # The rule's own offer: support answers or rejects; nobody can approve it.
    assert landed.offered_decisions == ("reject", "respond")
    with pytest.raises(InvalidDecision):
        await engine.decide_as_operator(landed.id, "approve", principal="local:tom")
    assert await side_effects(engine, run_id, "refund-1001") == []


async def test_the_decision_time_check_says_the_edit_needs_the_rule_it_lands_in(
    engine: Engine,
) -> None:
    _, request = await _small_refund(engine, "refund-answer-only")
    registry = engine._graphs.registry  # the engine's own graphs, as Engine.recheck_edit reads
    governance = registry.governance("refund-answer-only")
    tool = {t.name: t for t in registry.tools("refund-answer-only")}["issue_refund"]
    assert governance is not None

    check = await recheck_edit(
        governance=governance,
        graph="refund-answer-only",
        tool=tool,
        request=request,
        args=BIG,
        tool_counts={},
    )

    assert check.outcome is EditOutcome.NEEDS_APPROVAL
    assert check.rule == "big-refunds-answer-only"
    # An edit that stays in the rule the editor decided under is still theirs to make.
    smaller = {**request.shown["args"], "amount": 10.0}
    same = await recheck_edit(
        governance=governance,
        graph="refund-answer-only",
        tool=tool,
        request=request,
        args=smaller,
        tool_counts={},
    )
    assert same.outcome is EditOutcome.ALLOWED


async def test_an_edit_into_a_rule_without_edits_that_hides_the_order_is_not_covered(
    engine: Engine,
) -> None:
    # Item 2 on its own: the landing rule has the same approvers and offers approve, but
    # allow_edit: false, and it withholds order_id from its approvers.
    run_id, request = await _small_refund(engine, "refund-no-edit")

    await engine.decide_as_operator(request.id, "approve", principal="local:sue", args=BIG)
    assert await engine.worker.drain() == 1

    assert await side_effects(engine, run_id, "refund-1001") == []
    landed = await _the_new_request(engine, run_id, "big-refunds-as-shown")
    assert landed.allow_edit is False
    assert landed.offered_decisions == ("approve", "reject")
    assert landed.shown["args"]["order_id"] == MARKER
    assert landed.shown["redacted"] == ["order_id"]

    # The editor may not decide it; another support lead approves it as that rule offers.
    rules = ApproverRules()
    with pytest.raises(NotAllowed):
        rules.check_decide(Principal.local("sue", frozenset({"support"})), landed)
    rules.check_decide(Principal.local("tom", frozenset({"support"})), landed)
    await engine.decide_as_operator(landed.id, "approve", principal="local:tom")
    assert await engine.worker.drain() == 1
    effects = await side_effects(engine, run_id, "refund-1001")
    assert [e["args"] for e in effects] == [BIG]


async def test_before_the_call_runs_an_uncovered_edit_is_not_approved_by_the_old_decision(
    engine: Engine,
) -> None:
    # A decision taken without the decision-time check (an older engine, or a policy changed
    # between the decision and the resume) meets the same rule when the call is about to run.
    run_id, request = await _small_refund(engine, "refund-answer-only")

    async def accept_anything(_request: Any, args: dict[str, Any]) -> dict[str, Any]:
        return args

    decision = await decide(
        engine.requests,
        engine.decisions,
        request.id,
        "approve",
        principal="local:sue",
        args=BIG,
        recheck=accept_anything,
    )
    assert not isinstance(decision, Vote)
    assert decision.kind == "edit"
    assert await engine.worker.drain() == 1

    assert await side_effects(engine, run_id, "refund-1001") == []
    rows = await engine.ledger.for_run(run_id)
    assert [r.call_id for r in rows if r.tool == "issue_refund"] == []
    landed = await _the_new_request(engine, run_id, "big-refunds-answer-only")
    assert landed.offered_decisions == ("reject", "respond")
    first = await engine.requests.get(request.id)
    assert first is not None
    assert first.status is RequestStatus.APPROVED


@pytest.mark.slow
async def test_the_cli_edit_into_a_rule_that_never_approves_never_runs(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    env = {**cli_env, "APPROVALS_GRAPHS": json.dumps(GRAPHS)}
    await engine.accounts.add_user("sue", "correct horse battery staple", ["support"])
    run_id, request = await _small_refund(engine, "refund-answer-only")

    decided = await invoke(
        env, "decide", request.id, "approve", "--as", "sue", "--args", json.dumps(BIG)
    )
    assert decided.code == 0, decided.stderr
    assert decided.json()["decision"] == "edit"
    assert (await invoke(env, "worker", "--drain")).json() == {"resumed": 1}

    assert await side_effects(engine, run_id, "refund-1001") == []
    shown = (await invoke(env, "runs", "show", run_id, "--json")).json()
    assert shown["status"] == "waiting"
    assert "980.50" not in json.dumps(shown.get("answer"))
    pending = [r for r in await engine.requests.for_run(run_id) if r.status == "pending"]
    assert len(pending) == 1
    assert pending[0].offered_decisions == ("reject", "respond")
    assert pending[0].proposed_by in ("sue", "local:sue")
