"""Ports: what the engine needs from the outside world, as ``typing.Protocol``.

``storage`` implements them on PostgreSQL; ``graphs`` and the decision service depend only
on these shapes, so the domain never imports an adapter.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from approvals.decision_kinds import DEFAULT_DECISIONS, DecisionKind
from approvals.model import (
    DecisionRecord,
    EscalationStep,
    ExecutionStatus,
    JobStatus,
    OnExpiry,
    PendingCall,
    ResumeCheck,
    ResumeJob,
    Run,
    RunStatus,
    SweepResult,
    ToolExecution,
    Vote,
)
from approvals.principals import ApiToken, Principal


@dataclass(frozen=True, kw_only=True, slots=True)
class NewRequest:
    """What a paused tool call records before it interrupts."""

    run_id: str
    thread_id: str
    call_id: str
    tool: str
    shown: dict[str, Any]
    args_schema: dict[str, Any]
    identity: str
    reason: str | None
    requested_by: str
    expires_at: datetime
    state_version: str | None = None
    #: Approver groups a policy named for this request (empty: any approver).
    approvers: tuple[str, ...] = ()
    #: Whether the approver may edit the arguments (a policy may forbid it).
    allow_edit: bool = True
    #: Which decisions approvers may make (the ``HumanInTheLoopMiddleware`` vocabulary).
    allowed_decisions: tuple[str, ...] = DEFAULT_DECISIONS
    #: Distinct approvals needed (a policy may ask for more than one).
    quorum: int = 1
    #: What happens when the deadline passes (a policy may escalate instead of rejecting).
    on_expiry: OnExpiry = OnExpiry.REJECT
    #: The escalation steps still to come, in order (with ``on_expiry`` escalate).
    escalation_chain: tuple[EscalationStep, ...] = ()
    #: The approver whose edit these arguments are, when the edit needed other or more
    #: approvers: the editor may not decide this request.
    proposed_by: str | None = None


class ApprovalRequests(Protocol):
    async def open(self, new: NewRequest) -> tuple[PendingCall, DecisionRecord | None]:
        """The request for this exact call (run, call, identity), recorded if it is new, with
        its decision if one was made.

        Recording supersedes an earlier pending request for the same call with another
        identity. Idempotent: opening the same call again returns the same request.
        """
        ...

    async def get(self, request_id: str) -> PendingCall | None: ...

    async def for_run(self, run_id: str) -> list[PendingCall]:
        """A run's requests, oldest first."""
        ...

    async def record_tampered(self, request: PendingCall, *, principal: str | None) -> None:
        """Record (once per request) that its shown copy no longer matches its digest, as
        found when ``principal`` looked at it or tried to decide it."""
        ...


#: Judges whether the decider may decide the request as it stands when it is consumed (under
#: its row lock): raises ``RequestNotFound`` (it may not see it) or ``NotAllowed``.
RequestCheck = Callable[[PendingCall], None]


class Decisions(Protocol):
    async def decide(
        self,
        request_id: str,
        *,
        kind: DecisionKind,
        principal: str,
        reason: str | None,
        args: dict[str, Any] | None,
        args_identity: str | None,
        check: RequestCheck | None = None,
        override_by: str | None = None,
    ) -> DecisionRecord | Vote:
        """Consume a pending request in one transaction: the conditional update, the decision,
        the audit event and the resume job. Raises ``RequestNotFound`` or ``RequestNotPending``.

        ``check`` runs in that transaction, on the request read under its row lock, before
        anything is written: what it raises refuses the decision. ``override_by`` marks an
        operator's override (the console deciding in ``principal``'s name) in the audit event.

        A request whose quorum is more than one is consumed by a rejection, or by the approval
        that completes its quorum; an approval before that is a ``Vote`` (one per principal:
        ``AlreadyVoted`` for a second one). Such a request cannot be edited (``InvalidDecision``).
        """
        ...


class Expiry(Protocol):
    async def sweep(self) -> SweepResult:
        """Handle every pending request past its deadline, each exactly once: escalate it to
        the next step of its chain, or expire it (a rejection with reason ``expired``, an audit
        entry and a resume job, like a decision). A decision racing the sweep either wins
        before the deadline or is refused; never both."""
        ...


class ToolLedger(Protocol):
    async def begin(
        self, *, run_id: str, call_id: str, tool: str, key: str, args_identity: str
    ) -> tuple[bool, ToolExecution]:
        """Claim the single execution of (run, call). ``(True, row)`` when this caller owns
        it; ``(False, existing)`` when an execution was already recorded.

        ``existing`` may belong to another call that reused the call id: the caller compares
        ``existing.args_identity`` with its own, and on a mismatch neither runs the tool nor
        answers with ``existing``'s outcome (that outcome belongs to other arguments)."""
        ...

    async def finish(
        self,
        *,
        run_id: str,
        call_id: str,
        status: ExecutionStatus,
        result: Any = None,
        error: str | None = None,
        state_update: tuple[str, bytes] | None = None,
    ) -> ToolExecution:
        """Close a ``started`` execution with its outcome, and the state update its tool asked
        for (serialized: ``ToolExecution.state_update``); any other row is returned as it is."""
        ...

    async def reconcile(
        self,
        *,
        run_id: str,
        call_id: str,
        status: ExecutionStatus,
        result: Any = None,
        error: str | None = None,
    ) -> ToolExecution:
        """Record what an operator found about an ``outcome_unknown`` execution (succeeded or
        failed); a row that is no longer ``outcome_unknown`` is returned unchanged."""
        ...

    async def for_run(self, run_id: str) -> list[ToolExecution]:
        """A run's executions, in the order they began."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class Settlement:
    """Where a run stands after a step: its status, and the calls it now waits on as
    (request id, interrupt id) pairs."""

    run_id: str
    status: RunStatus
    error: str | None = None
    answer: str | None = None
    waiting_on: tuple[tuple[str, str], ...] = ()
    #: The payload-free interception records of the step, wire-shaped (AGENT-HOOKS-0.1 §10.3).
    records: tuple[dict[str, Any], ...] = ()
    #: The step's node updates (node, data) not recorded yet, in order: written before the
    #: settlement's status, which ends what a stream of the run shows of the step.
    events: tuple[tuple[str, dict[str, Any]], ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class NewRun:
    run_id: str
    thread_id: str
    graph: str
    started_by: str
    input: Any
    #: The thread id was made up for this run just now (it is the run's own id): no checkpoint
    #: can exist on it, so the checkpointer need not look for one before the first step.
    new_thread: bool = False


class RunLease(Protocol):
    """A run being executed by this process, holding its thread's lock."""

    def settle(self, settlement: Settlement) -> None:
        """Say where the run stands; written when the lease ends, as the lock is released."""
        ...


class Runs(Protocol):
    def begin(
        self, new: NewRun, *, check: Callable[[], Awaitable[None]] | None = None
    ) -> AbstractAsyncContextManager[RunLease]:
        """Take the thread's lock and create the run; on exit, write the run's settlement and
        release the lock. ``check`` runs under the lock before the run is created and may
        raise to refuse it."""
        ...

    async def get(self, run_id: str) -> Run | None: ...

    async def latest_on_thread(self, thread_id: str) -> Run | None:
        """The newest run on ``thread_id``, if any."""
        ...


class ClaimedJob(Protocol):
    """A resume job held by this worker until it is completed or the worker dies."""

    @property
    def job(self) -> ResumeJob: ...

    async def complete(
        self, status: JobStatus, error: str | None = None, settlement: Settlement | None = None
    ) -> None:
        """Mark the job finished (and settle its run) in the claim's transaction."""
        ...


class ResumeQueue(Protocol):
    def claim(
        self, skip_graphs: Collection[str] = ()
    ) -> AbstractAsyncContextManager[ClaimedJob | None]:
        """Claim the oldest queued job (skipping those held by others, and those of runs of
        ``skip_graphs``) and hold the per-thread lock of its run until the context exits. A
        crash releases both."""
        ...

    async def wait(self, seconds: float) -> bool:
        """Wait for a new-job notification; ``True`` when one arrived."""
        ...


class ResumeChecks(Protocol):
    async def begin(self, job: ResumeJob) -> ResumeCheck:
        """Log that the job's resume begins (``resume.started``) and read what it must know,
        in one statement whose snapshot is taken now, under the thread's lock the caller holds
        (not from before it waited for it): the run's status, starter and input, its trail's
        next sequence number, the interrupt still waiting."""
        ...


class Accounts(Protocol):
    """Local accounts and API tokens. Secrets are never stored: passwords as a memory-hard hash
    (scrypt), tokens as a SHA-256 digest."""

    async def add_user(self, name: str, password: str, groups: Sequence[str]) -> Principal:
        """Create a local account; raises ``AccountExists`` or ``InvalidAccount``."""
        ...

    async def authenticate(self, name: str, password: str) -> Principal | None:
        """The principal for a correct name and password; ``None`` otherwise (same cost
        whether or not the name exists)."""
        ...

    async def create_token(
        self, name: str, groups: Sequence[str], created_by: str, *, owner: str | None
    ) -> str:
        """Create an API token and return its secret, which is shown once and never stored;
        ``owner`` is the enabled local account it acts for (its groups among the owner's), or
        ``None`` for a service token (starts runs, never decides). Raises ``AccountExists`` (a
        token of that name exists) or ``InvalidAccount``."""
        ...

    async def verify_token(self, secret: str) -> Principal | None:
        """The principal of a valid, unrevoked token; ``None`` otherwise."""
        ...

    async def revoke_token(self, name: str) -> bool:
        """Revoke a token; ``False`` when there is no unrevoked token of that name."""
        ...

    async def tokens(self) -> list[ApiToken]: ...
