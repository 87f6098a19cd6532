"""The engine's records: pending calls, decisions, runs, tool executions and resume jobs.

Frozen, keyword-only dataclasses. Their states (``approvals.states``) and the decision kinds
(``approvals.decision_kinds``) are importable from here too, with the records they make up.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from approvals.decision_kinds import DECIDED_STATUSES as DECIDED_STATUSES
from approvals.decision_kinds import DECISION_TYPES as DECISION_TYPES
from approvals.decision_kinds import DEFAULT_DECISIONS as DEFAULT_DECISIONS
from approvals.decision_kinds import KIND_RULES, KindRules, offered
from approvals.decision_kinds import DecisionKind as DecisionKind
from approvals.decision_kinds import Ruling as Ruling
from approvals.identity import UNREPRESENTABLE, Unreadable, checked_shown_digest
from approvals.states import ExecutionStatus as ExecutionStatus
from approvals.states import JobStatus as JobStatus
from approvals.states import RequestStatus as RequestStatus
from approvals.states import RunStatus as RunStatus


class OnExpiry(enum.StrEnum):
    """What happens to a pending request when its deadline passes."""

    #: Rejected with reason ``expired``; the run resumes and the agent learns.
    REJECT = "reject"
    #: Handed to the next step of its escalation chain (rejected once the chain is spent).
    ESCALATE = "escalate"


#: The longest a request may wait on one step (its first deadline, or one escalation step's):
#: ten years. A deadline is a timestamp; one some hundred thousand years out overflowed it in
#: the sweep, whose every pass then failed on that one request.
MAX_EXPIRES_IN = timedelta(days=3650)


@dataclass(frozen=True, kw_only=True, slots=True)
class EscalationStep:
    """One step of an escalation chain: the approver groups a request passes to when its
    deadline passes, and its new deadline, counted from then."""

    approvers: tuple[str, ...]
    expires_in: timedelta

    def to_json(self) -> dict[str, Any]:
        return {
            "approvers": list(self.approvers),
            "expires_in_seconds": int(self.expires_in.total_seconds()),
        }

    @classmethod
    def from_json(cls, value: Any) -> EscalationStep | None:
        """The step a JSON object describes, or ``None`` when it is not a well-formed one."""
        if not isinstance(value, dict):
            return None
        approvers = value.get("approvers")
        seconds = value.get("expires_in_seconds")
        if not (
            isinstance(approvers, list)
            and approvers
            and all(isinstance(a, str) and a for a in approvers)
        ):
            return None
        if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds <= 0:
            return None
        if seconds > MAX_EXPIRES_IN.total_seconds():
            return None
        return cls(approvers=tuple(approvers), expires_in=timedelta(seconds=seconds))


#: The reason recorded for a rejection given without one (HumanInTheLoopMiddleware's reject
#: carries none unless the reviewer wrote one; ``require_reject_reason`` makes one required).
NO_REASON = "rejected without a reason"
#: The most distinct approvers a request may need (a policy's ``quorum``).
MAX_QUORUM = 20


@dataclass(frozen=True, kw_only=True, slots=True)
class PendingCall:
    """A pending (or once-pending) sensitive tool call and what the approver is shown."""

    id: str
    run_id: str
    thread_id: str
    call_id: str
    tool: str
    shown: dict[str, Any]
    args_schema: dict[str, Any]
    identity: str
    reason: str | None
    interrupt_id: str | None
    state_version: str | None
    requested_by: str
    status: RequestStatus
    created_at: datetime
    expires_at: datetime
    decided_at: datetime | None
    approvers: tuple[str, ...] = ()
    allow_edit: bool = True
    #: Which decisions approvers may make (``DECISION_TYPES``); edit also needs ``allow_edit``.
    allowed_decisions: tuple[str, ...] = DEFAULT_DECISIONS
    #: How many distinct approvers must approve (any one rejection rejects).
    quorum: int = 1
    #: What happens when the deadline passes, and the chain of escalations still to come.
    on_expiry: OnExpiry = OnExpiry.REJECT
    escalation_chain: tuple[EscalationStep, ...] = ()
    #: How many times the request was escalated (0: still with its first approvers).
    escalation_level: int = 0
    #: The person who started the run (``requested_by`` for a web account or an operator's
    #: name, the owner's ``local:NAME`` for a token, ``None`` for a service token): whose
    #: principals may not decide it. Set by the database when the request is recorded.
    requested_by_person: str | None = None
    #: The person who edited the arguments into this request (who may not decide it).
    proposed_by: str | None = None
    #: jcs-sha256 of what the approver is shown, taken when the request was recorded.
    shown_digest: str | None = None

    @property
    def offered_rules(self) -> tuple[KindRules, ...]:
        """The decision kinds an approver can make on this request, in the vocabulary's order:
        edit only where editing is allowed and one approver decides, respond only where one
        approver decides (an answer is not a vote). See ``approvals.decision_kinds``."""
        return offered(self.allowed_decisions, allow_edit=self.allow_edit, quorum=self.quorum)

    @property
    def offered_decisions(self) -> tuple[str, ...]:
        """The names of :attr:`offered_rules` (what the API and the interrupt payload list)."""
        return tuple(rules.kind.value for rules in self.offered_rules)

    @property
    def shown_intact(self) -> bool:
        """Whether the shown copy is still the one recorded (not edited behind our back)."""
        found = self.current_shown_digest()
        return found != UNREPRESENTABLE and self.shown_digest == found

    def current_shown_digest(self) -> str:
        """The digest of the shown copy as it is now; ``UNREPRESENTABLE`` where none can be
        taken (jsonb keeps numbers and nesting the canonical form refuses: a copy rewritten to
        hold one is a changed copy, not an error that takes every listing holding it down)."""
        try:
            return checked_shown_digest(
                run_id=self.run_id, call_id=self.call_id, tool=self.tool, shown=self.shown
            )
        except (ValueError, TypeError, RecursionError):
            return UNREPRESENTABLE

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> PendingCall:
        shown = row["shown"]
        if isinstance(row["args_schema"], Unreadable) or isinstance(
            row.get("escalation_chain"), Unreadable
        ):
            # A jsonb column read back as ``Unreadable`` (rewritten behind the engine's back):
            # the request counts as tampered whichever column it is, so it is never edited
            # against an empty schema nor shown as if it had no escalation chain.
            shown = Unreadable()
        return cls(
            id=str(row["id"]),
            run_id=str(row["run_id"]),
            thread_id=row["thread_id"],
            call_id=row["call_id"],
            tool=row["tool"],
            shown=shown,
            args_schema=row["args_schema"],
            identity=row["identity"],
            reason=row["reason"],
            interrupt_id=row["interrupt_id"],
            state_version=row["state_version"],
            requested_by=row["requested_by"],
            status=RequestStatus(row["status"]),
            created_at=row["created_at"],
            expires_at=row["expires_at"],
            decided_at=row["decided_at"],
            approvers=tuple(row.get("approvers") or ()),
            allow_edit=row.get("allow_edit", True),
            allowed_decisions=tuple(row.get("allowed_decisions") or DEFAULT_DECISIONS),
            quorum=row.get("quorum", 1),
            on_expiry=OnExpiry(row.get("on_expiry") or OnExpiry.REJECT),
            escalation_chain=tuple(
                step
                for item in row.get("escalation_chain") or ()
                if (step := EscalationStep.from_json(item)) is not None
            ),
            escalation_level=row.get("escalation_level", 0),
            requested_by_person=row.get("requested_by_person"),
            proposed_by=row.get("proposed_by"),
            shown_digest=row.get("shown_digest"),
        )

    def to_json(self) -> dict[str, Any]:
        """The request as JSON. A shown copy that could not be read back (``Unreadable``) is
        ``"shown": null`` with ``"shown_unreadable": true``: never the empty object, which
        would pass for a copy that shows no arguments. ``"shown_changed": true`` says the
        stored copy is not the one recorded (its digest differs: rewritten behind the engine's
        back), readable or not; the inbox and the API never list such a request."""
        unreadable = isinstance(self.shown, Unreadable)
        return {
            "id": self.id,
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "call_id": self.call_id,
            "tool": self.tool,
            "shown": None if unreadable else self.shown,
            "shown_unreadable": unreadable,
            "shown_changed": not self.shown_intact,
            "identity": self.identity,
            "reason": self.reason,
            "interrupt_id": self.interrupt_id,
            "state_version": self.state_version,
            "requested_by": self.requested_by,
            "status": self.status.value,
            "created_at": self.created_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
            "decided_at": self.decided_at.isoformat() if self.decided_at else None,
            "approvers": list(self.approvers),
            "allow_edit": self.allow_edit,
            "allowed_decisions": list(self.offered_decisions),
            "quorum": self.quorum,
            "escalation_level": self.escalation_level,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class DecisionRecord:
    """A consumed decision: bound to exactly one request, made by an authenticated principal."""

    id: str
    request_id: str
    run_id: str
    call_id: str
    kind: DecisionKind
    principal: str
    reason: str | None
    args: dict[str, Any] | None
    args_identity: str | None
    decided_at: datetime

    @property
    def approved(self) -> bool:
        """Whether the tool may run: an answer stands in for it, as a rejection stops it."""
        return KIND_RULES[self.kind].runs_tool

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> DecisionRecord:
        return cls(
            id=str(row["id"]),
            request_id=str(row["request_id"]),
            run_id=str(row["run_id"]),
            call_id=row["call_id"],
            kind=DecisionKind(row["kind"]),
            principal=row["principal"],
            reason=row["reason"],
            args=row["args"],
            args_identity=row["args_identity"],
            decided_at=row["decided_at"],
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "request_id": self.request_id,
            "run_id": self.run_id,
            "call_id": self.call_id,
            "decision": self.kind.value,
            "principal": self.principal,
            "reason": self.reason,
            "args": self.args,
            "args_identity": self.args_identity,
            "decided_at": self.decided_at.isoformat(),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Vote:
    """An approval counted towards a request's quorum; the request is still pending."""

    request_id: str
    principal: str
    approvals: int
    quorum: int

    def to_json(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "decision": "vote",
            "principal": self.principal,
            "approvals": self.approvals,
            "quorum": self.quorum,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class SweepResult:
    """What one pass of the expiry sweeper did: the requests it escalated and expired."""

    escalated: tuple[str, ...] = ()
    expired: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.escalated or self.expired)

    def to_json(self) -> dict[str, Any]:
        return {"escalated": list(self.escalated), "expired": list(self.expired)}


@dataclass(frozen=True, kw_only=True, slots=True)
class Run:
    id: str
    thread_id: str
    graph: str
    status: RunStatus
    started_by: str
    error: str | None
    answer: str | None
    created_at: datetime
    updated_at: datetime
    #: The run's input as admitted (what a resume passes to the graph again: its context and
    #: configurable values, which LangGraph does not checkpoint).
    input: dict[str, Any] = field(default_factory=dict)
    #: The person who started it (``approvals_person_of_v1(started_by)``: a token's owner, the
    #: principal itself otherwise; ``None`` for a service token, or where not read), so that a
    #: person's token and web account are the same starter. ``None`` matches no one.
    started_by_person: str | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Run:
        given = row.get("input")
        return cls(
            id=str(row["id"]),
            thread_id=row["thread_id"],
            graph=row["graph"],
            status=RunStatus(row["status"]),
            started_by=row["started_by"],
            error=row["error"],
            answer=row["answer"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            input=given if isinstance(given, dict) else {},
            started_by_person=row.get("started_by_person"),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolExecution:
    """One row of the tool-execution ledger: at most one per (run, call)."""

    run_id: str
    call_id: str
    tool: str
    idempotency_key: str
    args_identity: str
    status: ExecutionStatus
    result: Any
    error: str | None
    started_at: datetime
    finished_at: datetime | None
    #: The state update the tool asked for beside its result (a LangChain tool's
    #: ``Command(update=...)``), as the graph's checkpointer serialized it: its type tag and
    #: bytes. Never shown: it is given back to the graph when the ledger answers for the call.
    state_update: tuple[str, bytes] | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ToolExecution:
        update_type, update = row.get("state_update_type"), row.get("state_update")
        return cls(
            run_id=str(row["run_id"]),
            call_id=row["call_id"],
            tool=row["tool"],
            idempotency_key=row["idempotency_key"],
            args_identity=row["args_identity"],
            status=ExecutionStatus(row["status"]),
            result=row["result"],
            error=row["error"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            state_update=(
                (update_type, bytes(update))
                if update_type is not None and update is not None
                else None
            ),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "status": self.status.value,
            "idempotency_key": self.idempotency_key,
            "error": self.error,
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ResumeJob:
    """A queued instruction to resume one run after one decision."""

    id: int
    request_id: str
    decision_id: str
    run_id: str
    thread_id: str
    call_id: str
    graph: str
    attempts: int

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ResumeJob:
        return cls(
            id=row["id"],
            request_id=str(row["request_id"]),
            decision_id=str(row["decision_id"]),
            run_id=str(row["run_id"]),
            thread_id=row["thread_id"],
            call_id=row["call_id"],
            graph=row["graph"],
            attempts=row["attempts"],
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ResumeCheck:
    """What a resume reads under the thread's lock before it goes on, in one snapshot."""

    #: The run's status (``None``: no such run).
    run_status: RunStatus | None
    #: The interrupt of the thread's latest checkpoint that waits on the job's request
    #: (``None``: it no longer waits, or never got to).
    interrupt_id: str | None
    #: The next sequence number of the run's interception trail.
    next_sequence: int
    #: Who started the run ("" when there is no such run): a resume acts in their name.
    started_by: str = ""
    #: The run's input as admitted (what a resume passes to the graph again: its context and
    #: configurable values; a held input's message).
    run_input: dict[str, Any] = field(default_factory=dict)
    #: The job's request and its decision, when it is decided (``None``: not read, or not
    #: decided). A decided request and its decision never change again, so the resumed call
    #: takes its answer from here instead of reading it again (``graphs.hooks.approval``).
    decided: tuple[PendingCall, DecisionRecord] | None = None
