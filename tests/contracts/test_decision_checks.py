"""The ``Decisions`` port's ``check``: the caller's rules judge the request as it stands when it
is consumed, and a refusal writes nothing."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from approvals.errors import NotAllowed, RequestNotFound
from approvals.model import (
    DecisionKind,
    DecisionRecord,
    EscalationStep,
    OnExpiry,
    PendingCall,
    RequestStatus,
)
from tests.contracts.backends import Adapters
from tests.contracts.records import new_request, waiting_run


async def test_a_refusing_check_leaves_the_request_pending(adapters: Adapters) -> None:
    run = await waiting_run(adapters)
    request, _ = await adapters.requests.open(new_request(run, approvers=("finance",)))
    seen: list[PendingCall] = []

    def refuse(current: PendingCall) -> None:
        seen.append(current)
        raise NotAllowed(current.id, "not an approver")

    with pytest.raises(NotAllowed):
        await adapters.decisions.decide(
            request.id,
            kind=DecisionKind.APPROVE,
            principal="local:bob",
            reason=None,
            args=None,
            args_identity=None,
            check=refuse,
        )

    assert [r.id for r in seen] == [request.id]
    assert seen[0].approvers == ("finance",)
    still = await adapters.requests.get(request.id)
    assert still is not None
    assert still.status is RequestStatus.PENDING
    decided = await adapters.decisions.decide(
        request.id,
        kind=DecisionKind.APPROVE,
        principal="local:fin",
        reason=None,
        args=None,
        args_identity=None,
        check=lambda current: None,
    )
    assert isinstance(decided, DecisionRecord)


async def test_a_check_on_an_unknown_request_is_not_found(adapters: Adapters) -> None:
    with pytest.raises(RequestNotFound):
        await adapters.decisions.decide(
            str(uuid.uuid4()),
            kind=DecisionKind.APPROVE,
            principal="local:bob",
            reason=None,
            args=None,
            args_identity=None,
            check=lambda current: None,
        )


async def test_a_check_judges_the_request_as_escalated(adapters: Adapters) -> None:
    run = await waiting_run(adapters)
    chain = (EscalationStep(approvers=("leads",), expires_in=timedelta(hours=1)),)
    request, _ = await adapters.requests.open(
        new_request(
            run,
            approvers=("finance",),
            expires_in=timedelta(seconds=-1),
            on_expiry=OnExpiry.ESCALATE,
            escalation_chain=chain,
        )
    )
    await adapters.expiry.sweep()
    seen: list[tuple[str, ...]] = []

    await adapters.decisions.decide(
        request.id,
        kind=DecisionKind.APPROVE,
        principal="local:lee",
        reason=None,
        args=None,
        args_identity=None,
        check=lambda current: seen.append(current.approvers),
    )

    assert seen == [("leads",)]
