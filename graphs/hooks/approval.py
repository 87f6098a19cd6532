"""The approval slot: where one emission's liftable deny gets its human answer, and the one
backed by the database, where a human decision lifts (or keeps) it.

The emitter's resolver (``SLOT_RESOLVER``) asks the slot of the emission in progress
(``Session.emit`` names it with ``asking``); a ``DeferredSlot`` makes its slot only when asked.

The stored-decision slot (``StoredDecisionResolver``) never trusts the resume payload. When the
emitter consults it, it opens the request for this exact call (run, call id, content identity),
recording it if it is new, and answers with the decision the server holds for it, echoing the
emitter's context identity as AGENT-HOOKS-0.1 §9 requires. No decision yet: unresolved, and the
call pauses.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn, Protocol

from agent_hooks import (
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalResolution,
    Decision,
    InterceptionPoint,
    Transform,
    Verdict,
)
from langgraph.types import interrupt

from approvals.decision_kinds import Ruling
from approvals.errors import DatabaseUnavailable
from approvals.grants import SHOWN_KEY, Grant, Offer, StandingGrants, Within
from approvals.identity import call_identity
from approvals.masking import Withheld, mask_shown
from approvals.model import (
    DECIDED_STATUSES,
    DECISION_TYPES,
    MAX_EXPIRES_IN,
    MAX_QUORUM,
    DecisionKind,
    DecisionRecord,
    EscalationStep,
    OnExpiry,
    PendingCall,
    RequestStatus,
)
from approvals.ports import ApprovalRequests, NewRequest
from approvals.redaction import redact_shown, redacted_paths, restore, withheld
from approvals.tracing import annotate, run_span
from graphs.hooks import hitl
from graphs.hooks.flights import Flights


class ApprovalSlot(Protocol):
    """Where one emission's liftable deny gets its human answer."""

    @property
    def awaiting_human(self) -> bool:
        """The slot was asked and nobody has answered yet: the emission must pause."""
        ...

    @property
    def failed(self) -> bool:
        """Reading the answer failed: neither a deny nor a pause is safe."""
        ...

    async def resolve(self, request: ApprovalRequest, /) -> ApprovalResolution: ...

    def suspend(self, context: dict[str, Any]) -> NoReturn:
        """Pause the run until a human answers (``interrupt()``)."""
        ...


class DeferredSlot:
    """An ``ApprovalSlot`` made only when its emission consults it.

    Almost every emission is allowed and never asks its slot anything, while making one (the
    request a human would be shown, its content identity, its deadline) costs about as much
    as the emission's own context. ``make`` returns the slot, or ``None`` when there is none
    to ask (then the slot behaves as no slot: unresolved, and the deny stands)."""

    __slots__ = ("_made", "_make", "_slot")

    def __init__(self, make: Callable[[], ApprovalSlot | None]) -> None:
        self._make = make
        self._made = False
        self._slot: ApprovalSlot | None = None

    def _get(self) -> ApprovalSlot | None:
        if not self._made:
            self._slot = self._make()
            self._made = True
        return self._slot

    @property
    def made(self) -> ApprovalSlot | None:
        """The slot, if the emission consulted it."""
        return self._slot

    @property
    def awaiting_human(self) -> bool:
        return self._slot is not None and self._slot.awaiting_human

    @property
    def failed(self) -> bool:
        return self._slot is not None and self._slot.failed

    @property
    def retryable(self) -> bool:
        return bool(getattr(self._slot, "retryable", False))

    def abandon(self) -> None:
        getattr(self._slot, "abandon", lambda: None)()

    @property
    def request(self) -> Any:
        """The stored request the slot opened (``None`` before, or for a slot without one)."""
        return getattr(self._slot, "request", None)

    @property
    def decision(self) -> Any:
        """The decision the slot read (``None`` before, or for a slot without one)."""
        return getattr(self._slot, "decision", None)

    async def resolve(self, request: ApprovalRequest, /) -> ApprovalResolution:
        slot = self._get()
        if slot is None:
            return ApprovalResolution(
                outcome=ApprovalOutcome.UNRESOLVED, context_identity=request.context_identity
            )
        return await slot.resolve(request)

    def suspend(self, context: dict[str, Any]) -> NoReturn:
        slot = self._get()
        if slot is None:
            raise RuntimeError("an emission without a slot cannot wait for a human")
        slot.suspend(context)


_CURRENT_SLOT: ContextVar[ApprovalSlot | None] = ContextVar("approvals_slot", default=None)


class SlotResolver:
    """The emitter's resolver: asks the slot of the emission in progress. An emission without a
    slot cannot be lifted here: unresolved, and the deny stands."""

    async def resolve(self, request: ApprovalRequest, /) -> ApprovalResolution:
        slot = _CURRENT_SLOT.get()
        if slot is None:
            return ApprovalResolution(
                outcome=ApprovalOutcome.UNRESOLVED, context_identity=request.context_identity
            )
        return await slot.resolve(request)


SLOT_RESOLVER = SlotResolver()


@contextmanager
def asking(slot: ApprovalSlot | None) -> Iterator[None]:
    """Within this block, the emitter's resolver (``SLOT_RESOLVER``) asks ``slot``: the slot of
    the emission in progress (``Session.emit``)."""
    token = _CURRENT_SLOT.set(slot)
    try:
        yield
    finally:
        _CURRENT_SLOT.reset(token)


#: The values a run withheld from approvers in its requests before this one (read from the
#: run's state: ``graphs.hooks.withheld.earlier_withheld``).
EarlierWithheld = Callable[[NewRequest], Awaitable[list[Any]]]


def pause(request: PendingCall) -> NoReturn:
    """Interrupt the run until a human decides ``request``."""
    # HumanInTheLoopMiddleware's shape (``graphs.hooks.hitl``), so any HITL client renders it, with
    # the engine's fields (request id, identity, expiry, shown digest) beside.
    value = hitl.payload(request)
    # Per call, HITL publishes the decisions the call takes as the interrupt's schema; here as
    # a document only (a dict is published, never checked): the resume value is the engine's.
    schema = hitl.response_schema(request) if value.get("type") == "tool_approval" else None
    # interrupt() returns only when a resume value was already given to this task. The
    # server's record is the truth, and it holds no decision for this request: pause again.
    while True:
        interrupt(value, response_schema=schema)


#: The reason of the transform an approver's edited arguments become.
EDITED_BY_APPROVER = "edited_by_approver"
#: The reason of the deny a human's answer in the tool's place (``respond``) becomes.
ANSWERED_BY_APPROVER = "answered_by_approver"


def human_answer(verdict: Verdict, decision: DecisionRecord | None) -> str | None:
    """The answer a human gave in the tool's place (a ``respond`` decision), when ``verdict``
    is the deny it became; ``None`` for any other deny. Both hosts return it as the tool's
    result."""
    if (
        verdict.reason == ANSWERED_BY_APPROVER
        and decision is not None
        and decision.kind is DecisionKind.RESPOND
    ):
        return decision.reason
    return None


#: The request a resume was queued for and its decision, read under the thread's lock
#: (``ResumeCheck.decided``); set by the runner around the resumed invocation.
_DECIDED: ContextVar[tuple[PendingCall, DecisionRecord] | None] = ContextVar(
    "approvals_decided", default=None
)


@contextmanager
def decided_beforehand(decided: tuple[PendingCall, DecisionRecord] | None) -> Iterator[None]:
    """Within this block, a call asking for ``decided``'s request (the same run, call id and
    content identity) takes that decision instead of opening the request again: a decided
    request and its decision never change, so the read would return what is here."""
    token = _DECIDED.set(decided)
    try:
        yield
    finally:
        _DECIDED.reset(token)


def _decided_for(new: NewRequest) -> tuple[PendingCall, DecisionRecord] | None:
    """The request and decision read beforehand (``decided_beforehand``) when they are this
    call's: the same run, call id and content identity."""
    known = _DECIDED.get()
    if (
        known is not None
        and known[0].identity == new.identity
        and known[0].call_id == new.call_id
        and known[0].run_id == new.run_id
    ):
        return known
    return None


class StoredDecisionResolver:
    """Answers the emitter's approval seam from the decision stored for one call."""

    def __init__(
        self,
        requests: ApprovalRequests,
        new: NewRequest,
        earlier: EarlierWithheld | None = None,
    ) -> None:
        """``earlier``: the values the run withheld from approvers in its earlier requests
        (``graphs.hooks.withheld``), masked in this one too; none when not given."""
        self._requests = requests
        self._new = new
        self._earlier = earlier
        self.escalation: Verdict | None = None
        self.request: PendingCall | None = None
        self.decision: DecisionRecord | None = None
        #: The standing grant that decided the call instead of a request (``approvals.grants``).
        self.grant: Grant | None = None
        self.failed = False
        #: It failed on a slow or unreachable database: asking again is safe (``Session.emit``).
        self.retryable = False
        #: The grant's use and the request's opening, kept running past a timeout.
        self._flights = Flights()

    @property
    def awaiting_human(self) -> bool:
        """The seam was consulted and the call's request waits for a decision."""
        return (
            self.escalation is not None
            and not self.failed
            and self.request is not None
            and self.request.status is RequestStatus.PENDING
        )

    def abandon(self) -> None:
        """The emission gave up on this slot: what it still had in flight is cancelled."""
        self._flights.cancel()

    def suspend(self, context: dict[str, Any]) -> NoReturn:
        """Interrupt the run until a human decides this slot's request."""
        assert self.request is not None
        pause(self.request)

    async def resolve(self, request: ApprovalRequest, /) -> ApprovalResolution:
        self.escalation = request.verdict
        self.failed = self.retryable = False
        try:
            return await self._resolve(request)
        except BaseException as exc:
            # Reading the decision failed (or timed out): not "no decision yet". The caller
            # must not pause again on a call that may already be decided.
            self.failed = True
            # A timeout (the emitter's bound) cancels the read here, most often as it waits for
            # a pool connection: the database is busy, not wrong.
            busy = TimeoutError | asyncio.CancelledError | DatabaseUnavailable
            self.retryable = isinstance(exc, busy)
            raise

    async def _open(
        self, new: NewRequest, full_args: dict[str, Any]
    ) -> tuple[PendingCall, DecisionRecord | None]:
        """Open the request for ``new`` (recorded if it is new) and read its decision."""
        # Free text (a tool's result, the model quoting it, another call's arguments) may
        # repeat a value withheld from approvers: masked before anyone is shown it.
        values = withheld(full_args, redacted_paths(new.shown))
        if self._earlier is not None:
            values += await self._earlier(new)
        new = dataclasses.replace(new, shown=mask_shown(new.shown, Withheld(values)))
        with run_span("approvals.request", new.run_id, tool=new.tool, call_id=new.call_id) as span:
            request, decision = await self._requests.open(new)
            annotate(span, request_id=request.id, status=request.status)
            if span is not None and decision is None:
                # Nobody decided it yet: the call waits for a human here.
                span.update_name("approvals.pause")
        return request, decision

    async def _granted(self, new: NewRequest, args: dict[str, Any]) -> Grant | None:
        """The standing grant that decides this call, if its rule offers "always" and a grant
        made in this run covers it; ``None`` (ask a human) where the requests' adapter keeps
        no grants."""
        offer = Offer.of(new.shown)
        if offer is None or not isinstance(self._requests, StandingGrants):
            return None
        requests, key = self._requests, (new.call_id, new.identity)
        use = dict(run_id=new.run_id, tool=new.tool, rule=offer.rule, call_id=new.call_id)
        found: Grant | None = await self._flights.run(
            "grant", key, lambda: requests.use_grant(**use, identity=new.identity, args=args)
        )
        return found

    async def _resolve(self, request: ApprovalRequest) -> ApprovalResolution:
        echo = request.context_identity
        reason = request.verdict.message or request.verdict.reason
        new = _escalated(self._new, reason, request.verdict.approval or {})
        if request.interception_point is InterceptionPoint.PRE_TOOL_CALL:
            new = _as_presented(new, request.context.get("target"))
        # Redacted last, from the arguments as presented: the identity keeps binding them whole.
        full_args = new.shown.get("args") or {}
        redact = (request.verdict.approval or {}).get("redact")
        new = dataclasses.replace(new, shown=redact_shown(new.shown, redact))
        known = _decided_for(new)
        if known is None and request.interception_point is InterceptionPoint.PRE_TOOL_CALL:
            self.grant = await self._granted(new, full_args)
            if self.grant is not None:
                return by_grant(self.grant, echo)
        if known is not None:
            # What open() returns for a request that exists with this identity: that request
            # (nothing superseded, nothing created) and its decision, already read.
            self.request, self.decision = known
        else:
            # The earlier requests' read and this one's opening, kept in flight together.
            self.request, self.decision = await self._flights.run(
                "open", (new.call_id, new.identity), lambda: self._open(new, full_args)
            )
        status = self.request.status
        if status is RequestStatus.EXPIRED:
            return ApprovalResolution(
                outcome=ApprovalOutcome.REJECT,
                context_identity=echo,
                verdict=Verdict.deny(
                    reason="approval_expired", message="the approval request expired"
                ),
            )
        decision = self.decision
        if decision is None or status not in DECIDED_STATUSES:
            return ApprovalResolution(outcome=ApprovalOutcome.UNRESOLVED, context_identity=echo)
        if decision.kind is DecisionKind.RESPOND:
            # The human answered in the tool's place: the call is not run (a deny, to the
            # emitter), and the tool step hands the answer to the model as the tool's result.
            return ApprovalResolution(
                outcome=ApprovalOutcome.REJECT,
                context_identity=echo,
                verdict=Verdict.deny(reason=ANSWERED_BY_APPROVER, message=decision.reason),
            )
        if decision.kind is DecisionKind.REJECT:
            return ApprovalResolution(
                outcome=ApprovalOutcome.REJECT,
                context_identity=echo,
                verdict=Verdict.deny(reason="rejected_by_approver", message=decision.reason),
            )
        if decision.kind is DecisionKind.EDIT and decision.args is not None:
            return ApprovalResolution(
                outcome=ApprovalOutcome.APPROVE,
                context_identity=echo,
                verdict=Verdict(
                    decision=Decision.TRANSFORM,
                    reason=EDITED_BY_APPROVER,
                    # A redacted argument runs with its original value, never the marker.
                    transform=Transform(
                        path="$target",
                        value=restore(decision.args, full_args, redacted_paths(self.request.shown)),
                    ),
                ),
            )
        return ApprovalResolution(
            outcome=ApprovalOutcome.APPROVE,
            context_identity=echo,
            verdict=Verdict(decision=Decision.ALLOW, reason="approved_by_approver"),
        )


#: The reasons of the verdicts a standing grant's answer becomes.
APPROVED_BY_GRANT = "approved_by_grant"
REJECTED_BY_GRANT = "rejected_by_grant"


def by_grant(grant: Grant, echo: str | None) -> ApprovalResolution:
    """A call decided by a standing grant: its verdict names the grant and who made it, so the
    interception record and the audit log say how the call was decided."""
    said = f"standing grant {grant.id} by {grant.granted_by} (request {grant.request_id})"
    if grant.ruling is Ruling.REJECT:
        return ApprovalResolution(
            outcome=ApprovalOutcome.REJECT,
            context_identity=echo,
            verdict=Verdict.deny(reason=REJECTED_BY_GRANT, message=f"rejected by {said}"),
        )
    return ApprovalResolution(
        outcome=ApprovalOutcome.APPROVE,
        context_identity=echo,
        verdict=Verdict(
            decision=Decision.ALLOW, reason=APPROVED_BY_GRANT, message=f"approved by {said}"
        ),
    )


def _as_presented(new: NewRequest, target: Any) -> NewRequest:
    """The request for the arguments as they stand when the call is escalated.

    An interceptor registered before the escalating one may have transformed them; what runs
    after approval is the transformed value, so that is what the approver must see, and what
    the request's identity binds (AGENT-HOOKS-0.1 computes the identity it hands the resolver
    over the context as presented, after earlier transforms, for the same reason)."""
    if not isinstance(target, dict) or target == new.shown.get("args"):
        return new
    identity = call_identity(run_id=new.run_id, call_id=new.call_id, tool=new.tool, args=target)
    return dataclasses.replace(new, shown={**new.shown, "args": target}, identity=identity)


def _escalated(new: NewRequest, reason: str | None, approval: dict[str, Any]) -> NewRequest:
    """The request as the escalating verdict shapes it: its reason, and the deadline, approver
    groups, edit permission, allowed decisions, quorum and escalation chain a policy's approval
    block (or an ``interrupt_on`` entry) names."""
    changes: dict[str, Any] = {}
    if reason is not None:
        changes["reason"] = reason
    seconds = approval.get("expires_in_seconds")
    if isinstance(seconds, int) and not isinstance(seconds, bool) and seconds > 0:
        # Another interceptor's deadline, at most ten years out like a policy file's.
        seconds = min(seconds, int(MAX_EXPIRES_IN.total_seconds()))
        changes["expires_at"] = datetime.now(UTC) + timedelta(seconds=seconds)
    approvers = approval.get("approvers")
    if isinstance(approvers, list) and all(isinstance(a, str) for a in approvers):
        changes["approvers"] = tuple(approvers)
    if isinstance(approval.get("allow_edit"), bool):
        changes["allow_edit"] = approval["allow_edit"] and new.allow_edit
    allowed = approval.get("allowed_decisions")
    if (
        isinstance(allowed, list)
        and allowed
        and all(isinstance(d, str) and d in DECISION_TYPES for d in allowed)
    ):
        # The tool's allowed_decisions, in place of the default (which never offers respond).
        changes["allowed_decisions"] = tuple(d for d in DECISION_TYPES if d in allowed)
    rule = approval.get("rule")
    if isinstance(rule, str) and rule:
        # What escalated the call, shown to the approver beside the reason.
        changes["shown"] = {**new.shown, "rule": rule}
    quorum = approval.get("quorum")
    if isinstance(quorum, int) and not isinstance(quorum, bool) and 1 <= quorum <= MAX_QUORUM:
        changes["quorum"] = quorum
    always = approval.get("allow_always")
    within = Within.from_json(always.get("within", {})) if isinstance(always, dict) else None
    alone = changes.get("quorum", new.quorum) == 1
    if within is not None and isinstance(rule, str) and rule and alone:
        # The approver may decide "always" for this rule's calls of the tool in this run, within
        # these bounds (approvals.grants); shown, so the approver sees what "always" covers.
        offer = Offer(rule=rule, within=within)
        changes["shown"] = {**changes.get("shown", new.shown), SHOWN_KEY: offer.to_json()}
    chain = approval.get("then")
    if approval.get("on_expiry") == OnExpiry.ESCALATE and isinstance(chain, list) and chain:
        steps = [EscalationStep.from_json(item) for item in chain]
        # A chain is taken whole or not at all: a malformed one leaves the request to be
        # rejected when it expires (fail closed), never to wait for a group nobody named.
        if all(step is not None for step in steps):
            changes["on_expiry"] = OnExpiry.ESCALATE
            changes["escalation_chain"] = tuple(s for s in steps if s is not None)
    return dataclasses.replace(new, **changes) if changes else new
