"""What runs is what an approver saw and was allowed to approve: an approver's edit goes through
the policy again, a transform before the escalation is what the approver sees, and a shown copy
changed behind the engine's back is neither shown nor decided."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agent_hooks import Decision, Transform, Verdict
from langgraph.pregel import Pregel

from approvals.authz import ApproverRules
from approvals.decisions import decide
from approvals.errors import EditRefused, NotAllowed, ShownCopyChanged
from approvals.model import RequestStatus, Vote
from approvals.policy import load_policy
from approvals.principals import Principal
from graphs.examples import refund
from graphs.hooks.governance import Governance
from graphs.tool_call.deps import GraphDeps
from tests.integration.helpers import person_token, scalar, side_effects, start_refund
from web.engine import Engine, open_engine
from web.settings import Settings

EMAIL = {"message": "Email bob@example.com about the quarterly report"}


async def test_an_edit_the_policy_denies_is_refused_and_the_request_stays_pending(
    engine: Engine,
) -> None:
    out = await engine.runner.start("email", EMAIL, principal="ann")
    request = await engine.requests.get(out.pending[0])
    assert request is not None
    outside = {**request.shown["args"], "to": "mallory@evil.test"}

    with pytest.raises(EditRefused) as refused:
        await engine.decide_as_operator(out.pending[0], "approve", principal="bob", args=outside)

    assert refused.value.rule == "no-external-mail"
    assert "no-external-mail" in str(refused.value)
    still = await engine.requests.get(out.pending[0])
    assert still is not None
    assert still.status is RequestStatus.PENDING
    assert await scalar(engine, "select count(*) from decisions") == 0
    assert await engine.worker.drain() == 0
    assert await side_effects(engine, out.run_id, "send-1") == []


async def test_an_edit_needing_other_approvers_is_their_request_never_the_editors(
    engine: Engine,
) -> None:
    # Support may approve a 25.00 refund on order 1001; 980.50 on order 1004 is finance's call.
    run = await start_refund(engine)
    shown = await engine.requests.get(run.pending[0])
    assert shown is not None
    assert shown.approvers == ("support",)
    edited = {"order_id": "1004", "amount": 980.5, "reason": "customer request"}

    # Sue edits through her API token; her web account is the same person.
    await person_token(engine, "sue", "support", "finance")
    sue = Principal.local("sue", frozenset({"support", "finance"}))
    decision = await engine.decide_as_operator(
        run.pending[0], "approve", principal="token:sue", args=edited
    )
    assert not isinstance(decision, Vote)
    assert decision.kind == "edit"
    assert await engine.worker.drain() == 1

    # The refund did not run: the edit is a new request, for finance.
    assert await side_effects(engine, run.run_id, "refund-1001") == []
    paused = await engine.runs.get(run.run_id)
    assert paused is not None
    assert paused.status == "waiting"
    pending = [r for r in await engine.requests.for_run(run.run_id) if r.status == "pending"]
    assert len(pending) == 1
    finance = pending[0]
    assert finance.approvers == ("finance",)
    assert finance.shown["args"] == edited
    assert finance.proposed_by == sue.id

    # The editor may not decide it, even as a member of finance.
    rules = ApproverRules()
    with pytest.raises(NotAllowed):
        rules.check_decide(sue, finance)
    fay = Principal.local("fay", frozenset({"finance"}))
    rules.check_decide(fay, finance)

    await engine.decide_as_operator(finance.id, "approve", principal=fay.id)
    assert await engine.worker.drain() == 1
    effects = await side_effects(engine, run.run_id, "refund-1001")
    assert [e["args"] for e in effects] == [edited]
    done = await engine.runs.get(run.run_id)
    assert done is not None
    assert done.status == "completed"
    assert "980.50 on order 1004" in (done.answer or "")


async def test_an_edit_the_same_approvers_may_decide_runs_on_their_decision(
    engine: Engine,
) -> None:
    run = await start_refund(engine)
    edited = {"order_id": "1001", "amount": 10.0, "reason": "partial refund"}

    await engine.decide_as_operator(run.pending[0], "approve", principal="sue", args=edited)
    assert await engine.worker.drain() == 1

    effects = await side_effects(engine, run.run_id, "refund-1001")
    assert [e["args"] for e in effects] == [edited]
    assert [r.status for r in await engine.requests.for_run(run.run_id)] == ["approved"]


async def test_the_policy_checks_an_edit_again_when_it_is_about_to_run(engine: Engine) -> None:
    # An edit accepted without the policy's check (an older engine, or a policy that changed
    # between the decision and the resume) is still checked before the tool runs.
    out = await engine.runner.start("email", EMAIL, principal="ann")
    request = await engine.requests.get(out.pending[0])
    assert request is not None
    outside = {**request.shown["args"], "to": "mallory@evil.test"}

    async def accept_anything(_request: Any, args: dict[str, Any]) -> dict[str, Any]:
        return args

    await decide(
        engine.requests,
        engine.decisions,
        out.pending[0],
        "approve",
        principal="bob",
        args=outside,
        recheck=accept_anything,
    )
    assert await engine.worker.drain() == 1

    assert await side_effects(engine, out.run_id, "send-1") == []
    rows = await engine.ledger.for_run(out.run_id)
    assert [r.call_id for r in rows if r.tool == "send_email"] == []
    finished = await engine.runs.get(out.run_id)
    assert finished is not None
    assert finished.status == "completed"


async def test_an_edit_without_a_policy_to_check_it_is_refused(engine: Engine) -> None:
    run = await start_refund(engine)
    edited = {"order_id": "1001", "amount": 10.0, "reason": "partial refund"}
    with pytest.raises(EditRefused):
        await decide(
            engine.requests,
            engine.decisions,
            run.pending[0],
            "approve",
            principal="sue",
            args=edited,
        )
    assert await scalar(engine, "select count(*) from decisions") == 0


class _Halve:
    """Transforms every refund to half its amount (registered before the escalating policy)."""

    def intercept(self, ctx: dict[str, Any], /) -> Verdict:
        call = ctx.get("tool_call") or {}
        if ctx.get("interception_point") != "pre_tool_call" or call.get("name") != "issue_refund":
            return Verdict.allow()
        amount = round(float(ctx["target"]["amount"]) / 2, 2)
        return Verdict(
            decision=Decision.TRANSFORM,
            reason="halve",
            transform=Transform(path="$target.amount", value=amount),
        )


def build_halved(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """The refund agent with ``_Halve`` registered before its policy."""
    policy = load_policy(refund.POLICY)
    governance = Governance(interceptors=[_Halve(), policy], names=["halve", "policy"])
    return refund.build(deps, governance=governance)


@pytest.fixture
async def halved(database_url: str, tmp_path: Path) -> AsyncIterator[Engine]:
    settings = Settings(
        database_url=database_url,
        config_file=tmp_path / "none.toml",
        graphs={"halved-refund": "tests.integration.test_edit_recheck:build_halved"},
    )
    async with open_engine(database_url, settings) as engine:
        yield engine


async def test_a_transform_before_the_escalation_is_what_the_approver_sees_and_what_runs(
    halved: Engine,
) -> None:
    engine = halved
    out = await engine.runner.start("halved-refund", {"message": "refund 1001"}, principal="ann")
    assert out.status == "waiting", out
    request = await engine.requests.get(out.pending[0])
    assert request is not None
    assert request.shown["args"]["amount"] == 12.5

    await engine.decide_as_operator(out.pending[0], "approve", principal="sue")
    assert await engine.worker.drain() == 1

    effects = await side_effects(engine, out.run_id, "refund-1001")
    assert [e["args"]["amount"] for e in effects] == [12.5]


async def test_a_shown_copy_changed_in_the_database_is_neither_shown_nor_decided(
    engine: Engine,
) -> None:
    run = await start_refund(engine)
    request_id = run.pending[0]
    async with engine.connection() as conn:
        await conn.execute(
            "update approval_requests set shown = jsonb_set(shown, '{args,amount}', '12.0')"
            " where id = %s",
            (request_id,),
        )

    with pytest.raises(ShownCopyChanged):
        await engine.shown_request(request_id, viewer="local:sue")
    with pytest.raises(ShownCopyChanged):
        await engine.decide_as_operator(request_id, "approve", principal="sue")
    listed = await engine.shown_requests(
        await engine.requests.search(RequestStatus.PENDING, 10), viewer="local:sue"
    )
    assert listed == []

    assert await scalar(engine, "select count(*) from decisions") == 0
    events = await scalar(
        engine,
        "select count(*) from audit_events where kind = 'request.tampered' and request_id = %s",
        request_id,
    )
    assert events == 1
    assert await side_effects(engine, run.run_id, "refund-1001") == []
