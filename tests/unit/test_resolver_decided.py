"""A resumed call takes the decision its resume read under the thread's lock, and only for
the request that decision belongs to (``graphs.hooks.approval.decided_beforehand``)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from agent_hooks import ApprovalOutcome, ApprovalRequest, InterceptionPoint, Verdict

from approvals.memory import MemoryStore
from approvals.memory.requests import MemoryApprovalRequests, MemoryDecisions
from approvals.model import (
    MAX_EXPIRES_IN,
    DecisionKind,
    DecisionRecord,
    PendingCall,
    RequestStatus,
)
from approvals.ports import NewRequest, NewRun
from graphs.hooks.approval import StoredDecisionResolver, _escalated, decided_beforehand
from tests.contracts.records import new_request


class CountedRequests(MemoryApprovalRequests):
    """The in-memory requests port, counting how often a request is opened (read)."""

    opened = 0

    async def open(self, new: NewRequest) -> tuple[PendingCall, DecisionRecord | None]:
        self.opened += 1
        return await super().open(new)


def escalation() -> ApprovalRequest:
    return ApprovalRequest(
        context_identity="ctx-identity",
        interception_point=InterceptionPoint.PRE_TOOL_CALL,
        verdict=Verdict.escalate(reason="sensitive_tool"),
        context={},
    )


async def approved(
    store: MemoryStore, requests: CountedRequests, new: NewRequest
) -> tuple[PendingCall, DecisionRecord]:
    request, _ = await requests.open(new)
    decision = await MemoryDecisions(store).decide(
        request.id,
        kind=DecisionKind.APPROVE,
        principal="local:bob",
        reason=None,
        args=None,
        args_identity=None,
    )
    assert isinstance(decision, DecisionRecord)
    decided, _ = await requests.open(new)
    return decided, decision


def a_run() -> NewRun:
    return NewRun(
        run_id=str(uuid.uuid4()),
        thread_id="thread-1",
        graph="refund",
        started_by="local:alice",
        input={},
    )


async def test_the_call_of_the_decided_request_takes_its_decision_without_a_read() -> None:
    store = MemoryStore()
    requests = CountedRequests(store)
    new = new_request(a_run())
    decided = await approved(store, requests, new)
    before = requests.opened

    resolver = StoredDecisionResolver(requests, new)
    with decided_beforehand(decided):
        resolution = await resolver.resolve(escalation())

    assert requests.opened == before
    assert resolution.outcome is ApprovalOutcome.APPROVE
    assert resolution.context_identity == "ctx-identity"
    assert (resolver.request, resolver.decision) == decided


async def test_another_call_or_other_content_opens_its_own_request() -> None:
    store = MemoryStore()
    requests = CountedRequests(store)
    run = a_run()
    decided = await approved(store, requests, new_request(run))

    for other in (new_request(run, identity="identity-b"), new_request(run, call_id="call-2")):
        before = requests.opened
        resolver = StoredDecisionResolver(requests, other)
        with decided_beforehand(decided):
            resolution = await resolver.resolve(escalation())

        assert requests.opened == before + 1
        # Its own request, recorded now and waiting for a human.
        assert resolution.outcome is ApprovalOutcome.UNRESOLVED
        assert resolver.request is not None
        assert resolver.request.identity == other.identity
        assert resolver.request.status is RequestStatus.PENDING


async def test_outside_a_resume_the_request_is_read() -> None:
    store = MemoryStore()
    requests = CountedRequests(store)
    new = new_request(a_run())
    await approved(store, requests, new)
    before = requests.opened

    resolution = await StoredDecisionResolver(requests, new).resolve(escalation())

    assert requests.opened == before + 1
    assert resolution.outcome is ApprovalOutcome.APPROVE


def test_another_interceptors_deadline_is_at_most_ten_years_out() -> None:
    # A deadline of 200,000,000 days overflowed (a step's crash, or a timestamp the sweep
    # could not write): it is cut to the ten years a policy file may name.
    run = NewRun(
        run_id=str(uuid.uuid4()),
        thread_id="thread-1",
        graph="refund",
        started_by="local:alice",
        input={},
    )
    shaped = _escalated(new_request(run), None, {"expires_in_seconds": 17_280_000_000_000})
    assert shaped.expires_at - datetime.now(UTC) <= MAX_EXPIRES_IN
    assert shaped.expires_at - datetime.now(UTC) > MAX_EXPIRES_IN - timedelta(minutes=1)
