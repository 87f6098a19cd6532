"""Runs and the tool-execution ledger.

A run is settled in one place, the SQL function ``approvals_settle_step_v4`` (migration 0025),
whether the step ended in the process that started the run (``PgRuns.begin``) or in a worker
closing a resume job (``storage.queue``). Its rules: the step's interception records, and the
node updates it is given, are always kept (the updates before the run's status event); a run
that ended (completed, blocked, failed or cancelled) is final, so settling it again is refused
(audited as ``run.settle_refused``; only a cancel's own settlement over its cancellation is
taken) and the function says so, which the writers log and keep as ``outcome``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, nullcontext
from datetime import datetime
from typing import Any

from approvals.errors import ApprovalsError
from approvals.listing import Viewer
from approvals.model import ExecutionStatus, Run, RunStatus, ToolExecution
from approvals.ports import NewRun, Settlement
from storage.checkpoints import new_thread
from storage.db import Database, Row, json
from storage.requests import custom_planned

log = logging.getLogger(__name__)

#: What ``approvals_settle_step_v4`` answers when a settlement to a run that ended is refused.
REFUSED = "refused"


def settlement_outcome(outcome: str | None, settlement: Settlement) -> str | None:
    """Log a refused settlement (the run had ended, usually cancelled while its step ran) and
    return the function's answer."""
    if outcome == REFUSED:
        log.info(
            "run %s had ended (cancelled, or settled before): its settlement to %s was refused",
            settlement.run_id,
            settlement.status.value,
        )
    return outcome


def settlement_params(settlement: Settlement) -> dict[str, Any]:
    return {
        "run_id": settlement.run_id,
        "status": settlement.status.value,
        "error": settlement.error,
        "answer": settlement.answer,
        "request_ids": [request_id for request_id, _ in settlement.waiting_on],
        "interrupt_ids": [interrupt_id for _, interrupt_id in settlement.waiting_on],
        "records": json(list(settlement.records)),
        "events": json([{"node": node, "data": data} for node, data in settlement.events]),
    }


class PgRunLease:
    def __init__(self) -> None:
        self.settlement: Settlement | None = None
        #: After the lease is released: 'settled', or 'refused' when the run had ended
        #: (``None``: nothing was settled).
        self.outcome: str | None = None

    def settle(self, settlement: Settlement) -> None:
        self.settlement = settlement


class PgRuns:
    def __init__(self, db: Database) -> None:
        self._db = db

    @asynccontextmanager
    async def begin(
        self, new: NewRun, *, check: Callable[[], Awaitable[None]] | None = None
    ) -> AsyncIterator[PgRunLease]:
        """The thread's session-level advisory lock, on a connection held for the run. A fresh
        thread takes it in the statement that creates the run, and the lease's settlement is
        written by the statement that releases it."""
        params = {
            "id": new.run_id,
            "thread_id": new.thread_id,
            "graph": new.graph,
            "started_by": new.started_by,
            "input": json(new.input),
        }
        lock = {"thread_id": new.thread_id}
        async with self._db.connection() as conn:
            released = False
            try:
                if check is None:
                    await self._db.one("lock_and_create_run", params, conn)
                else:
                    await self._db.one("thread_lock", lock, conn)
                    try:
                        await check()
                    except ApprovalsError:
                        await self._db.one("thread_unlock", lock, conn)
                        released = True
                        raise
                    await self._db.one("create_run", params, conn)
                lease = PgRunLease()
                with new_thread(new.thread_id) if new.new_thread else nullcontext():
                    yield lease
                if lease.settlement is None:
                    await self._db.one("thread_unlock", lock, conn)
                else:
                    settled = settlement_params(lease.settlement)
                    row = await self._db.one("settle_run_and_unlock", settled | lock, conn)
                    lease.outcome = settlement_outcome(
                        row["settled"] if row else None, lease.settlement
                    )
                released = True
            finally:
                if not released:
                    # Never hand a connection that may still hold the lock back to the
                    # pool: closing it releases the lock, and the pool replaces it.
                    with contextlib.suppress(Exception):
                        await conn.close()

    async def get(self, run_id: str) -> Run | None:
        row = await self._db.one("get_run", {"id": run_id})
        return Run.from_row(row) if row else None

    async def latest_on_thread(self, thread_id: str) -> Run | None:
        row = await self._db.one("latest_run_on_thread", {"thread_id": thread_id})
        return Run.from_row(row) if row else None

    async def page(
        self,
        viewer: Viewer,
        *,
        status: RunStatus | None = None,
        graph: str | None = None,
        after: tuple[datetime, str] | None = None,
        limit: int = 50,
    ) -> list[Run]:
        """Up to ``limit`` runs ``viewer`` may see, newest first, after the keyset position
        ``after`` (the last row's created_at and id)."""
        params = viewer.params() | {
            "status": status.value if status else None,
            "graph": graph,
            "after_key": after[0] if after else None,
            "after_id": after[1] if after else None,
            "limit": limit,
        }
        # Planned for its parameters, as the request lists are.
        return [Run.from_row(r) for r in await custom_planned(self._db, "runs_page", params)]


class PgToolLedger:
    """At most one execution per (run, call); a crash mid-call is ``outcome_unknown``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def begin(
        self, *, run_id: str, call_id: str, tool: str, key: str, args_identity: str
    ) -> tuple[bool, ToolExecution]:
        params = {
            "run_id": run_id,
            "call_id": call_id,
            "tool": tool,
            "key": key,
            "args_identity": args_identity,
        }
        row = await self._db.one("begin_execution", params)
        if row is None:
            # A racing begin inserted the row after this statement's snapshot was taken (the
            # insert waited for it, then did nothing, and the read cannot see it): the next
            # statement's snapshot does, and answers with that execution.
            row = await self._db.one("begin_execution", params)
        if row is None:
            raise RuntimeError(f"no execution recorded for ({run_id}, {call_id})")
        return bool(row["owned"]), ToolExecution.from_row(row)

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
        return await self._close(
            "finish_execution", run_id, call_id, status, result, error, state_update
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
        return await self._close(
            "reconcile_execution", run_id, call_id, status, result, error, None
        )

    async def _close(
        self,
        query: str,
        run_id: str,
        call_id: str,
        status: ExecutionStatus,
        result: Any,
        error: str | None,
        state_update: tuple[str, bytes] | None,
    ) -> ToolExecution:
        """Write an execution's outcome with ``query`` (a finish, or an operator's answer)."""
        row = await self._db.one(
            query,
            {
                "run_id": run_id,
                "call_id": call_id,
                "status": status.value,
                "result": json(result),
                "error": error,
                "state_update_type": state_update[0] if state_update else None,
                "state_update": state_update[1] if state_update else None,
            },
        )
        assert row is not None
        return ToolExecution.from_row(row)

    async def unknown_outcomes(self) -> list[Row]:
        """Executions whose outcome is unknown, with their pending reconciliation request."""
        return await self._db.all("unknown_outcomes", {})

    async def for_run(self, run_id: str) -> list[ToolExecution]:
        rows = await self._db.all("run_executions", {"run_id": run_id})
        return [ToolExecution.from_row(r) for r in rows]
