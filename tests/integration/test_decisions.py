"""A decision is bound to one pending call and consumed at most once."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from approvals.errors import (
    EditedArgumentsInvalid,
    InvalidDecision,
    InvalidRequestId,
    RequestNotFound,
    RequestNotPending,
)
from approvals.model import DecisionRecord, ExecutionStatus, RequestStatus
from tests.integration.helpers import scalar, side_effects, start_refund
from web.engine import Engine


async def test_sixteen_concurrent_decisions_consume_the_request_once(engine: Engine) -> None:
    run = await start_refund(engine)
    request_id = run.pending[0]

    results = await asyncio.gather(
        *(
            engine.decide_as_operator(request_id, "approve", principal=f"approver-{i}")
            for i in range(16)
        ),
        return_exceptions=True,
    )

    winners = [r for r in results if not isinstance(r, BaseException)]
    losers = [r for r in results if isinstance(r, BaseException)]
    assert len(winners) == 1
    assert len(losers) == 15
    assert all(isinstance(e, RequestNotPending) for e in losers)
    assert await scalar(engine, "select count(*) from decisions") == 1
    assert await scalar(engine, "select count(*) from resume_queue") == 1
    await engine.worker.drain()
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1


async def test_approve_racing_reject_agrees_with_what_ran(engine: Engine) -> None:
    for _ in range(6):
        run = await start_refund(engine)
        request_id = run.pending[0]
        results = await asyncio.gather(
            engine.decide_as_operator(request_id, "approve", principal="ann"),
            engine.decide_as_operator(request_id, "reject", principal="rob", reason="no"),
            return_exceptions=True,
        )
        won = [r for r in results if not isinstance(r, BaseException)]
        assert len(won) == 1
        assert isinstance(won[0], DecisionRecord)
        await engine.worker.drain()
        stored = await engine.requests.get(request_id)
        assert stored is not None
        effects = await side_effects(engine, run.run_id, "refund-1001")
        executions = {e.call_id: e for e in await engine.ledger.for_run(run.run_id)}
        if stored.status is RequestStatus.APPROVED:
            assert won[0].kind == "approve"
            assert len(effects) == 1
            assert executions["refund-1001"].status is ExecutionStatus.SUCCEEDED
        else:
            assert stored.status is RequestStatus.REJECTED
            assert won[0].kind == "reject"
            assert effects == []
            assert "refund-1001" not in executions
        finished = await engine.runs.get(run.run_id)
        assert finished is not None
        assert finished.status == "completed"


async def test_unknown_forged_and_decided_ids_are_refused_distinctly(engine: Engine) -> None:
    run = await start_refund(engine)
    with pytest.raises(RequestNotFound):
        await engine.decide_as_operator(str(uuid.uuid4()), "approve", principal="bob")
    for forged in ["1 OR 1=1", "", "../../etc", str(uuid.uuid1()), run.pending[0].upper() + "x"]:
        with pytest.raises(InvalidRequestId):
            await engine.decide_as_operator(forged, "approve", principal="bob")
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    with pytest.raises(RequestNotPending) as info:
        await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    assert info.value.status == "approved"


async def test_an_expired_request_cannot_be_approved(engine: Engine) -> None:
    run = await start_refund(engine)
    async with engine.connection() as conn:
        await conn.execute(
            "update approval_requests set expires_at = now() - interval '1 second' where id = %s",
            (run.pending[0],),
        )
    with pytest.raises(RequestNotPending) as info:
        await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    assert info.value.status == "expired"
    assert await scalar(engine, "select count(*) from resume_queue") == 0


async def test_bad_decisions_are_refused_before_anything_is_written(engine: Engine) -> None:
    run = await start_refund(engine)
    rid = run.pending[0]
    with pytest.raises(InvalidDecision):
        await engine.decide_as_operator(rid, "maybe", principal="bob")
    with pytest.raises(InvalidDecision):
        await engine.decide_as_operator(
            rid, "reject", principal="bob", reason="x", args={"amount": 1}
        )
    with pytest.raises(InvalidDecision):
        await engine.decide_as_operator(rid, "approve", principal="  ")
    with pytest.raises(EditedArgumentsInvalid) as info:
        await engine.decide_as_operator(
            rid, "approve", principal="bob", args={"order_id": "1001", "amount": -3}
        )
    assert info.value.errors[0]["path"] == "amount"
    with pytest.raises(EditedArgumentsInvalid):
        await engine.decide_as_operator(
            rid, "approve", principal="bob", args={"order_id": "1001", "amount": 3, "to": "x"}
        )
    assert await scalar(engine, "select count(*) from decisions") == 0
    stored = await engine.requests.get(rid)
    assert stored is not None
    assert stored.status is RequestStatus.PENDING


async def test_edited_arguments_are_what_the_tool_receives(engine: Engine) -> None:
    run = await start_refund(engine)
    edited = {"order_id": "1001", "amount": 10.0, "reason": "partial refund"}
    decision = await engine.decide_as_operator(
        run.pending[0], "approve", principal="bob", args=edited
    )
    assert isinstance(decision, DecisionRecord)
    assert decision.kind == "edit"
    assert decision.args_identity is not None
    await engine.worker.drain()
    effects = await side_effects(engine, run.run_id, "refund-1001")
    assert [e["args"] for e in effects] == [edited]
    executions = await engine.ledger.for_run(run.run_id)
    refund = next(e for e in executions if e.call_id == "refund-1001")
    assert refund.args_identity == decision.args_identity


async def test_approving_unchanged_arguments_is_a_plain_approval(engine: Engine) -> None:
    run = await start_refund(engine)
    request = await engine.requests.get(run.pending[0])
    assert request is not None
    decision = await engine.decide_as_operator(
        run.pending[0], "approve", principal="bob", args=request.shown["args"]
    )
    assert isinstance(decision, DecisionRecord)
    assert decision.kind == "approve"
    assert decision.args is None


async def test_the_decision_is_logged_with_its_principal(engine: Engine) -> None:
    run = await start_refund(engine)
    await engine.decide_as_operator(run.pending[0], "reject", principal="rob", reason="duplicate")
    events = await engine.audit.for_run(run.run_id)
    decided = [e for e in events if e["kind"] == "request.decided"]
    assert len(decided) == 1
    assert decided[0]["principal"] == "rob"
    assert decided[0]["data"]["decision"] == "reject"
    assert decided[0]["data"]["identity"].startswith("jcs-sha256:")


async def test_a_changed_call_supersedes_its_old_request(engine: Engine) -> None:
    from datetime import UTC, datetime, timedelta

    from approvals.ports import NewRequest

    run = await start_refund(engine)
    old = await engine.requests.get(run.pending[0])
    assert old is not None
    changed = NewRequest(
        run_id=old.run_id,
        thread_id=old.thread_id,
        call_id=old.call_id,
        tool=old.tool,
        shown={**old.shown, "args": {**old.shown["args"], "amount": 1.0}},
        args_schema=old.args_schema,
        identity="jcs-sha256:" + "0" * 64,
        reason=old.reason,
        requested_by=old.requested_by,
        expires_at=datetime.now(UTC) + timedelta(hours=1),
    )
    new, no_decision = await engine.requests.open(changed)
    assert no_decision is None
    assert new.id != old.id
    assert new.status is RequestStatus.PENDING
    again, _ = await engine.requests.open(changed)
    assert again.id == new.id  # recording the same call twice is one request
    with pytest.raises(RequestNotPending) as info:
        await engine.decide_as_operator(old.id, "approve", principal="bob")
    assert info.value.status == "superseded"
    kinds = [e["kind"] for e in await engine.audit.for_run(run.run_id)]
    assert kinds.count("request.superseded") == 1
    assert kinds.count("request.created") == 2
