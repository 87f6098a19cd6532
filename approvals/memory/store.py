"""The tables the in-memory adapters share, and the few rules several of them apply.

One ``MemoryStore`` is one database: build the adapters of one engine on the same store, as the
PostgreSQL adapters share one pool. Every write happens between two awaits, so it is atomic in
the way a single statement is; the thread locks stand in for PostgreSQL's advisory locks.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from approvals.decision_kinds import DecisionKind
from approvals.model import (
    DecisionRecord,
    JobStatus,
    PendingCall,
    RequestStatus,
    RunStatus,
    ToolExecution,
)
from approvals.ports import Settlement


def now() -> datetime:
    return datetime.now(UTC)


@dataclass(kw_only=True)
class StoredJob:
    """A row of the resume queue."""

    id: int
    request_id: str
    decision_id: str
    run_id: str
    thread_id: str
    status: JobStatus = JobStatus.QUEUED
    attempts: int = 0
    last_error: str | None = None
    finished_at: datetime | None = None


@dataclass(kw_only=True)
class StoredUser:
    password_hash: str
    groups: list[str]
    created_at: datetime
    disabled: bool = False


@dataclass(kw_only=True)
class StoredToken:
    name: str
    digest: str
    groups: list[str]
    created_by: str
    created_at: datetime
    owner: str | None
    revoked_at: datetime | None = None


@dataclass(kw_only=True)
class StoredRun:
    id: str
    thread_id: str
    graph: str
    status: RunStatus
    started_by: str
    input: Any
    created_at: datetime
    updated_at: datetime
    error: str | None = None
    answer: str | None = None


@dataclass
class MemoryStore:
    """Every record of one in-memory engine, keyed as the PostgreSQL tables are."""

    runs: dict[str, StoredRun] = field(default_factory=dict)
    requests: dict[str, PendingCall] = field(default_factory=dict)
    #: One decision per request (the ``decisions.request_id`` unique key).
    decisions: dict[str, DecisionRecord] = field(default_factory=dict)
    #: Per request: (principal, person) of each counted approval, in order.
    votes: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    jobs: list[StoredJob] = field(default_factory=list)
    executions: dict[tuple[str, str], ToolExecution] = field(default_factory=dict)
    effects: list[dict[str, Any]] = field(default_factory=list)
    #: Per run: its interception records, as settlements wrote them.
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: Per run: the node updates (node, data) its settlements carried, in order.
    updates: dict[str, list[tuple[str, dict[str, Any]]]] = field(default_factory=dict)
    #: Per thread: the interrupts its last settled step waits on (request id -> interrupt id),
    #: which is what the thread's latest checkpoint holds in the PostgreSQL engine.
    waiting: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Requests found tampered with: who found it first, and the digest found.
    tampered: dict[str, tuple[str | None, str]] = field(default_factory=dict)
    #: Jobs claimed right now (PostgreSQL: their row locks), whichever queue claimed them.
    claimed: set[int] = field(default_factory=set)
    users: dict[str, StoredUser] = field(default_factory=dict)
    tokens: dict[str, StoredToken] = field(default_factory=dict)
    _thread_locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    _listeners: list[asyncio.Queue[str]] = field(default_factory=list)
    _job_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def thread_lock(self, thread_id: str) -> asyncio.Lock:
        """The lock a run's step and a resume of it take (PostgreSQL: the advisory lock)."""
        return self._thread_locks.setdefault(thread_id, asyncio.Lock())

    def listen(self) -> asyncio.Queue[str]:
        """A new listener: it receives the run id of every job queued from now on."""
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._listeners.append(queue)
        return queue

    def person_of(self, principal: str | None) -> str | None:
        """The person a principal acts for (``approvals_person_of``): the owner's
        ``local:NAME`` for a token (``None`` for a service token or an unknown one), the
        principal itself otherwise."""
        if principal is None:
            return None
        if principal.startswith("token:"):
            token = self.tokens.get(principal.removeprefix("token:"))
            return None if token is None or token.owner is None else f"local:{token.owner}"
        return principal

    def consume(
        self,
        request: PendingCall,
        *,
        status: RequestStatus,
        kind: DecisionKind,
        principal: str,
        reason: str | None,
        args: dict[str, Any] | None = None,
        args_identity: str | None = None,
    ) -> DecisionRecord:
        """Decide a pending request: its new status, the decision, and a resume job (with the
        wake-up), as ``decide`` and ``sweep_expired`` do in one statement."""
        at = now()
        self.requests[request.id] = dataclasses.replace(request, status=status, decided_at=at)
        decision = DecisionRecord(
            id=str(uuid.uuid4()),
            request_id=request.id,
            run_id=request.run_id,
            call_id=request.call_id,
            kind=kind,
            principal=principal,
            reason=reason,
            args=args,
            args_identity=args_identity,
            decided_at=at,
        )
        self.decisions[request.id] = decision
        self.jobs.append(
            StoredJob(
                id=next(self._job_ids),
                request_id=request.id,
                decision_id=decision.id,
                run_id=request.run_id,
                thread_id=request.thread_id,
            )
        )
        for listener in self._listeners:
            listener.put_nowait(request.run_id)
        return decision

    def settle(self, settlement: Settlement, *, with_status: bool = True) -> None:
        """The end of a step (``approvals_settle_step``): its node updates and interception
        records and, with ``with_status``, the run's settlement. A cancelled run keeps its
        status (PostgreSQL's ``runs_cancelled_is_final`` trigger drops the write)."""
        if settlement.events:
            self.updates.setdefault(settlement.run_id, []).extend(settlement.events)
        self.records.setdefault(settlement.run_id, []).extend(settlement.records)
        if not with_status:
            return
        for request_id, interrupt_id in settlement.waiting_on:
            request = self.requests.get(request_id)
            if request is not None and request.interrupt_id != interrupt_id:
                self.requests[request_id] = dataclasses.replace(request, interrupt_id=interrupt_id)
        run = self.runs.get(settlement.run_id)
        if run is None:
            return
        self.waiting[run.thread_id] = dict(settlement.waiting_on)
        if run.status is RunStatus.CANCELLED and settlement.status is not RunStatus.CANCELLED:
            return
        run.status = settlement.status
        run.error = settlement.error
        run.answer = settlement.answer if settlement.answer is not None else run.answer
        run.updated_at = now()
