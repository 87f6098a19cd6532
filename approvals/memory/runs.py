"""Runs and their thread lock, the execute-once ledger, the resume queue and the resume check in
memory (and a side-effect log of the examples' shape): the rules of ``storage/runs.py``,
``storage/queue.py`` and ``storage/checkpoints.py``, minus the audit log."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import asynccontextmanager
from typing import Any

from approvals.decision_kinds import DECIDED_STATUSES
from approvals.memory.store import MemoryStore, StoredJob, StoredRun, now
from approvals.model import (
    ExecutionStatus,
    JobStatus,
    ResumeCheck,
    ResumeJob,
    Run,
    RunStatus,
    ToolExecution,
)
from approvals.ports import NewRun, Settlement


def _run(stored: StoredRun, person: str | None) -> Run:
    return Run(
        id=stored.id,
        thread_id=stored.thread_id,
        graph=stored.graph,
        status=stored.status,
        started_by=stored.started_by,
        error=stored.error,
        answer=stored.answer,
        created_at=stored.created_at,
        updated_at=stored.updated_at,
        input=stored.input if isinstance(stored.input, dict) else {},
        started_by_person=person,
    )


class MemoryRunLease:
    def __init__(self) -> None:
        self.settlement: Settlement | None = None

    def settle(self, settlement: Settlement) -> None:
        self.settlement = settlement


class MemoryRuns:
    """Runs, each step under its thread's lock."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        self._store = store if store is not None else MemoryStore()

    @asynccontextmanager
    async def begin(
        self, new: NewRun, *, check: Callable[[], Awaitable[None]] | None = None
    ) -> AsyncIterator[MemoryRunLease]:
        """Hold the thread's lock for the step; the settlement is written on a clean exit only
        (a step that raised leaves the run as it was, like a PostgreSQL session that died)."""
        async with self._store.thread_lock(new.thread_id):
            if check is not None:
                await check()
            at = now()
            self._store.runs[new.run_id] = StoredRun(
                id=new.run_id,
                thread_id=new.thread_id,
                graph=new.graph,
                status=RunStatus.RUNNING,
                started_by=new.started_by,
                input=new.input,
                created_at=at,
                updated_at=at,
            )
            lease = MemoryRunLease()
            yield lease
            if lease.settlement is not None:
                self._store.settle(lease.settlement)

    async def get(self, run_id: str) -> Run | None:
        stored = self._store.runs.get(run_id)
        return _run(stored, self._store.person_of(stored.started_by)) if stored else None

    async def latest_on_thread(self, thread_id: str) -> Run | None:
        on_thread = [r for r in self._store.runs.values() if r.thread_id == thread_id]
        if not on_thread:
            return None
        latest = max(on_thread, key=lambda r: (r.created_at, r.id))
        return _run(latest, self._store.person_of(latest.started_by))


class MemoryToolLedger:
    """At most one execution per (run, call); a finished outcome is never overwritten."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        self._store = store if store is not None else MemoryStore()

    async def begin(
        self, *, run_id: str, call_id: str, tool: str, key: str, args_identity: str
    ) -> tuple[bool, ToolExecution]:
        existing = self._store.executions.get((run_id, call_id))
        if existing is not None:
            return False, existing
        row = ToolExecution(
            run_id=run_id,
            call_id=call_id,
            tool=tool,
            idempotency_key=key,
            args_identity=args_identity,
            status=ExecutionStatus.STARTED,
            result=None,
            error=None,
            started_at=now(),
            finished_at=None,
        )
        self._store.executions[(run_id, call_id)] = row
        return True, row

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
        """Close a ``started`` execution; any other row is returned unchanged."""
        return self._close(
            ExecutionStatus.STARTED, run_id, call_id, status, result, error, state_update
        )

    async def reconcile(
        self,
        *,
        run_id: str,
        call_id: str,
        status: ExecutionStatus,
        result: Any = None,
        error: str | None = None,
    ) -> ToolExecution:
        """What an operator found about an ``outcome_unknown`` execution; any other row is
        returned unchanged."""
        return self._close(
            ExecutionStatus.OUTCOME_UNKNOWN, run_id, call_id, status, result, error, None
        )

    def _close(
        self,
        expected: ExecutionStatus,
        run_id: str,
        call_id: str,
        status: ExecutionStatus,
        result: Any,
        error: str | None,
        state_update: tuple[str, bytes] | None,
    ) -> ToolExecution:
        row = self._store.executions[(run_id, call_id)]
        if row.status is not expected:
            return row
        row = dataclasses.replace(
            row,
            status=status,
            result=result,
            error=error,
            finished_at=now(),
            state_update=state_update,
        )
        self._store.executions[(run_id, call_id)] = row
        return row

    async def for_run(self, run_id: str) -> list[ToolExecution]:
        return [e for (run, _), e in self._store.executions.items() if run == run_id]


class MemorySideEffects:
    """Every real tool invocation, in order (no uniqueness, on purpose: a double execution
    shows up twice). Not an engine port: the shape of the examples' side-effect log
    (``graphs.examples.effects.SideEffectLog``), for hosts that give their graphs one."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        self._store = store if store is not None else MemoryStore()

    @property
    def effects(self) -> list[dict[str, Any]]:
        return self._store.effects

    async def record(self, *, run_id: str, call_id: str, tool: str, args: dict[str, Any]) -> None:
        self._store.effects.append(
            {"run_id": run_id, "call_id": call_id, "tool": tool, "args": args}
        )

    async def for_call(self, run_id: str, call_id: str) -> list[dict[str, Any]]:
        return [e for e in self._store.effects if e["run_id"] == run_id and e["call_id"] == call_id]


class MemoryClaimedJob:
    """A claimed job; its completion is written when the claim ends cleanly (PostgreSQL: the
    claim's transaction commits), and dropped if the claim ends with an exception."""

    def __init__(self, job: ResumeJob) -> None:
        self._job = job
        self.completion: tuple[JobStatus, str | None, Settlement | None] | None = None

    @property
    def job(self) -> ResumeJob:
        return self._job

    async def complete(
        self, status: JobStatus, error: str | None = None, settlement: Settlement | None = None
    ) -> None:
        self.completion = (JobStatus(status), error, settlement)


class MemoryResumeQueue:
    """Claims the oldest queued job nobody holds, then waits for and holds its thread's lock."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        self._store = store if store is not None else MemoryStore()
        self._wakeups: asyncio.Queue[str] | None = None

    @asynccontextmanager
    async def claim(
        self, skip_graphs: Collection[str] = ()
    ) -> AsyncIterator[MemoryClaimedJob | None]:
        store = self._store
        held = store.claimed
        stored = next(
            (
                j
                for j in store.jobs
                if j.status is JobStatus.QUEUED
                and j.id not in held
                and self._job(j).graph not in skip_graphs
            ),
            None,
        )
        if stored is None:
            yield None
            return
        held.add(stored.id)
        try:
            async with store.thread_lock(stored.thread_id):
                claimed = MemoryClaimedJob(self._job(stored))
                yield claimed
                if claimed.completion is not None:
                    self._finish(stored, *claimed.completion)
        finally:
            held.discard(stored.id)

    def _job(self, stored: StoredJob) -> ResumeJob:
        run = self._store.runs.get(stored.run_id)
        request = self._store.requests.get(stored.request_id)
        return ResumeJob(
            id=stored.id,
            request_id=stored.request_id,
            decision_id=stored.decision_id,
            run_id=stored.run_id,
            thread_id=stored.thread_id,
            call_id=request.call_id if request else "",
            graph=run.graph if run else "",
            attempts=stored.attempts,
        )

    def _finish(
        self, stored: StoredJob, status: JobStatus, error: str | None, settlement: Settlement | None
    ) -> None:
        stored.status = status
        stored.last_error = error
        stored.attempts += 1
        stored.finished_at = now()
        if settlement is not None:
            self._store.settle(settlement)

    async def queued(self) -> int:
        return sum(1 for j in self._store.jobs if j.status is JobStatus.QUEUED)

    async def wait(self, seconds: float) -> bool:
        """Wait for a job queued since this queue's first wait (PostgreSQL: since it began to
        listen); ``True`` when one was."""
        if self._wakeups is None:
            self._wakeups = self._store.listen()
        try:
            await asyncio.wait_for(self._wakeups.get(), timeout=seconds)
        except TimeoutError:
            return False
        return True


class MemoryResumeChecks:
    """What a resume reads under its thread's lock: the run's status, starter and input, its
    trail's next sequence number, and the interrupt its last settled step waits on for the
    job's request."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        self._store = store if store is not None else MemoryStore()

    async def begin(self, job: ResumeJob) -> ResumeCheck:
        store = self._store
        run = store.runs.get(job.run_id)
        sequences = [int(r.get("sequence", -1)) for r in store.records.get(job.run_id, [])]
        request = store.requests.get(job.request_id)
        decision = store.decisions.get(job.request_id)
        decided = (
            (request, decision)
            if request is not None and decision is not None and request.status in DECIDED_STATUSES
            else None
        )
        return ResumeCheck(
            run_status=run.status if run else None,
            interrupt_id=store.waiting.get(job.thread_id, {}).get(job.request_id),
            next_sequence=max(sequences) + 1 if sequences else 0,
            started_by=run.started_by if run else "",
            run_input=dict(run.input) if run and isinstance(run.input, dict) else {},
            decided=decided,
        )
