"""The ``Expiry`` port: every pending request past its deadline is escalated or expired, once,
and an expiry is a rejection that resumes the run like a decision."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from approvals.errors import RequestNotPending
from approvals.model import DecisionKind, EscalationStep, OnExpiry, RequestStatus
from tests.contracts.backends import Adapters
from tests.contracts.records import new_request, waiting_run

PAST = timedelta(seconds=-1)


async def test_a_request_past_its_deadline_expires_as_a_rejection(adapters: Adapters) -> None:
    run = await waiting_run(adapters)
    due, _ = await adapters.requests.open(new_request(run, expires_in=PAST))
    later, _ = await adapters.requests.open(new_request(run, call_id="call-2"))

    result = await adapters.expiry.sweep()

    assert (result.expired, result.escalated) == ((due.id,), ())
    expired, decision = await adapters.requests.open(new_request(run, expires_in=PAST))
    assert expired.status is RequestStatus.EXPIRED
    assert decision is not None
    assert (decision.kind, decision.principal, decision.reason) == (
        DecisionKind.REJECT,
        "system:expiry",
        "expired",
    )
    untouched = await adapters.requests.get(later.id)
    assert untouched is not None
    assert untouched.status is RequestStatus.PENDING
    async with adapters.queue.claim() as claimed:
        assert claimed is not None
        assert (claimed.job.request_id, claimed.job.decision_id) == (due.id, decision.id)


async def test_an_escalating_request_passes_to_its_next_approvers(adapters: Adapters) -> None:
    run = await waiting_run(adapters)
    chain = (
        EscalationStep(approvers=("leads",), expires_in=timedelta(hours=2)),
        EscalationStep(approvers=("directors",), expires_in=timedelta(hours=4)),
    )
    request, _ = await adapters.requests.open(
        new_request(
            run,
            expires_in=PAST,
            on_expiry=OnExpiry.ESCALATE,
            escalation_chain=chain,
            approvers=("finance",),
        )
    )

    result = await adapters.expiry.sweep()

    assert (result.expired, result.escalated) == ((), (request.id,))
    escalated = await adapters.requests.get(request.id)
    assert escalated is not None
    assert escalated.status is RequestStatus.PENDING
    assert escalated.approvers == ("leads",)
    assert escalated.escalation_chain == chain[1:]
    assert escalated.escalation_level == 1
    in_two_hours = datetime.now(UTC) + timedelta(hours=2)
    assert abs(escalated.expires_at - in_two_hours) < timedelta(minutes=1)
    assert not await adapters.expiry.sweep()


async def test_a_spent_chain_expires_the_request(adapters: Adapters) -> None:
    run = await waiting_run(adapters)
    request, _ = await adapters.requests.open(
        new_request(run, expires_in=PAST, on_expiry=OnExpiry.ESCALATE)
    )

    result = await adapters.expiry.sweep()

    assert result.expired == (request.id,)


async def test_racing_sweeps_expire_a_request_once(adapters: Adapters) -> None:
    run = await waiting_run(adapters)
    request, _ = await adapters.requests.open(new_request(run, expires_in=PAST))

    results = await asyncio.gather(*(adapters.expiry.sweep() for _ in range(4)))

    assert [e for r in results for e in r.expired] == [request.id]
    async with adapters.queue.claim() as claimed:
        assert claimed is not None
        async with adapters.other_queue().claim() as second:
            assert second is None


async def test_a_decided_request_is_not_swept(adapters: Adapters) -> None:
    run = await waiting_run(adapters)
    request, _ = await adapters.requests.open(new_request(run))
    await adapters.decisions.decide(
        request.id,
        kind=DecisionKind.APPROVE,
        principal="local:bob",
        reason=None,
        args=None,
        args_identity=None,
    )

    assert not await adapters.expiry.sweep()
    with pytest.raises(RequestNotPending):
        await adapters.decisions.decide(
            request.id,
            kind=DecisionKind.REJECT,
            principal="local:carol",
            reason=None,
            args=None,
            args_identity=None,
        )
