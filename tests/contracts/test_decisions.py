"""The ``Decisions`` port: a pending request is consumed at most once, and a request that needs
several approvers counts each person's approval once."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from approvals.errors import (
    AlreadyVoted,
    InvalidDecision,
    NotAllowed,
    RequestNotFound,
    RequestNotPending,
)
from approvals.model import DecisionKind, DecisionRecord, RequestStatus, Vote
from tests.contracts.backends import Adapters
from tests.contracts.records import new_request, waiting_run


async def _decide(
    adapters: Adapters,
    request_id: str,
    kind: DecisionKind = DecisionKind.APPROVE,
    principal: str = "local:bob",
) -> DecisionRecord | Vote:
    return await adapters.decisions.decide(
        request_id, kind=kind, principal=principal, reason=None, args=None, args_identity=None
    )


async def test_racing_deciders_consume_a_request_once(adapters: Adapters) -> None:
    run = await waiting_run(adapters)
    request, _ = await adapters.requests.open(new_request(run))

    results = await asyncio.gather(
        *(_decide(adapters, request.id, principal=f"local:approver-{i}") for i in range(8)),
        return_exceptions=True,
    )

    winners = [r for r in results if isinstance(r, DecisionRecord)]
    assert len(winners) == 1
    assert all(isinstance(r, RequestNotPending) for r in results if r not in winners)
    _, decision = await adapters.requests.open(new_request(run))
    assert decision == winners[0]
    stored = await adapters.requests.get(request.id)
    assert stored is not None
    assert stored.status is RequestStatus.APPROVED


@pytest.mark.parametrize(
    ("kind", "status"),
    [
        (DecisionKind.APPROVE, RequestStatus.APPROVED),
        (DecisionKind.EDIT, RequestStatus.APPROVED),
        (DecisionKind.REJECT, RequestStatus.REJECTED),
        (DecisionKind.RESPOND, RequestStatus.ANSWERED),
    ],
)
async def test_a_decision_records_what_was_decided(
    adapters: Adapters, kind: DecisionKind, status: RequestStatus
) -> None:
    run = await waiting_run(adapters)
    request, _ = await adapters.requests.open(new_request(run))

    decision = await adapters.decisions.decide(
        request.id,
        kind=kind,
        principal="local:bob",
        reason="looks right",
        args={"order": 1002},
        args_identity="identity-b",
    )

    assert isinstance(decision, DecisionRecord)
    assert (decision.request_id, decision.run_id, decision.call_id) == (
        request.id,
        run.run_id,
        "call-1",
    )
    assert (decision.kind, decision.principal, decision.reason) == (
        kind,
        "local:bob",
        "looks right",
    )
    assert (decision.args, decision.args_identity) == ({"order": 1002}, "identity-b")
    stored = await adapters.requests.get(request.id)
    assert stored is not None
    assert stored.status is status
    assert stored.decided_at is not None


async def test_a_decided_request_refuses_another_decision_with_its_status(
    adapters: Adapters,
) -> None:
    run = await waiting_run(adapters)
    request, _ = await adapters.requests.open(new_request(run))
    await _decide(adapters, request.id, DecisionKind.REJECT)

    with pytest.raises(RequestNotPending) as refused:
        await _decide(adapters, request.id)
    assert refused.value.status == "rejected"


async def test_a_request_past_its_deadline_is_refused_as_expired(adapters: Adapters) -> None:
    run = await waiting_run(adapters)
    request, _ = await adapters.requests.open(new_request(run, expires_in=timedelta(seconds=-1)))

    for kind in DecisionKind:
        with pytest.raises(RequestNotPending) as refused:
            await _decide(adapters, request.id, kind)
        assert refused.value.status == "expired"


async def test_an_unknown_request_is_not_found(adapters: Adapters) -> None:
    with pytest.raises(RequestNotFound):
        await _decide(adapters, str(uuid.uuid4()))


async def test_a_quorum_is_met_by_distinct_approvers_and_consumed_by_the_last(
    adapters: Adapters,
) -> None:
    run = await waiting_run(adapters)
    request, _ = await adapters.requests.open(new_request(run, quorum=3))

    first = await _decide(adapters, request.id, principal="local:bob")
    second = await _decide(adapters, request.id, principal="local:carol")
    assert first == Vote(request_id=request.id, principal="local:bob", approvals=1, quorum=3)
    assert second == Vote(request_id=request.id, principal="local:carol", approvals=2, quorum=3)
    pending = await adapters.requests.get(request.id)
    assert pending is not None
    assert pending.status is RequestStatus.PENDING

    last = await _decide(adapters, request.id, principal="local:dave")

    assert isinstance(last, DecisionRecord)
    assert (last.kind, last.principal) == (DecisionKind.APPROVE, "local:dave")
    assert await adapters.votes(request.id) == ["local:bob", "local:carol", "local:dave"]
    done = await adapters.requests.get(request.id)
    assert done is not None
    assert done.status is RequestStatus.APPROVED


async def test_racing_approvals_complete_a_quorum_once(adapters: Adapters) -> None:
    run = await waiting_run(adapters)
    request, _ = await adapters.requests.open(new_request(run, quorum=2))

    results = await asyncio.gather(
        *(_decide(adapters, request.id, principal=f"local:approver-{i}") for i in range(6)),
        return_exceptions=True,
    )

    assert sum(isinstance(r, Vote) for r in results) == 1
    assert sum(isinstance(r, DecisionRecord) for r in results) == 1
    assert sum(isinstance(r, RequestNotPending) for r in results) == 4
    assert len(await adapters.votes(request.id)) == 2


async def test_one_person_approves_once_whichever_principal_they_use(adapters: Adapters) -> None:
    await adapters.accounts.add_user("bob", "correct horse battery staple", ["approvers"])
    await adapters.accounts.create_token("bob-bot", ["approvers"], "local:admin", owner="bob")
    run = await waiting_run(adapters)
    request, _ = await adapters.requests.open(new_request(run, quorum=2))
    await _decide(adapters, request.id, principal="local:bob")

    with pytest.raises(AlreadyVoted) as refused:
        await _decide(adapters, request.id, principal="token:bob-bot")
    assert refused.value.earlier == "local:bob"
    with pytest.raises(AlreadyVoted):
        await _decide(adapters, request.id, principal="local:bob")
    assert await adapters.votes(request.id) == ["local:bob"]


async def test_a_service_token_never_counts_towards_a_quorum(adapters: Adapters) -> None:
    await adapters.accounts.create_token("ci", ["approvers"], "local:admin", owner=None)
    run = await waiting_run(adapters)
    request, _ = await adapters.requests.open(new_request(run, quorum=2))

    with pytest.raises(NotAllowed):
        await _decide(adapters, request.id, principal="token:ci")
    assert await adapters.votes(request.id) == []


@pytest.mark.parametrize("kind", [DecisionKind.EDIT, DecisionKind.RESPOND])
async def test_a_quorum_request_cannot_be_edited_or_answered(
    adapters: Adapters, kind: DecisionKind
) -> None:
    run = await waiting_run(adapters)
    request, _ = await adapters.requests.open(new_request(run, quorum=2))

    with pytest.raises(InvalidDecision):
        await _decide(adapters, request.id, kind)
    still = await adapters.requests.get(request.id)
    assert still is not None
    assert still.status is RequestStatus.PENDING


async def test_one_rejection_consumes_a_quorum_request(adapters: Adapters) -> None:
    run = await waiting_run(adapters)
    request, _ = await adapters.requests.open(new_request(run, quorum=2))
    await _decide(adapters, request.id, principal="local:bob")

    rejected = await _decide(adapters, request.id, DecisionKind.REJECT, principal="local:carol")

    assert isinstance(rejected, DecisionRecord)
    assert rejected.kind is DecisionKind.REJECT
    with pytest.raises(RequestNotPending):
        await _decide(adapters, request.id, principal="local:dave")
