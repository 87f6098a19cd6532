"""LangGraph's checkpointer on the engine's pool, and a light read of what a thread waits on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg import AsyncCursor
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

from approvals.model import (
    DECIDED_STATUSES,
    DecisionRecord,
    PendingCall,
    ResumeCheck,
    ResumeJob,
    RunStatus,
)
from storage.db import Connection, Database, Row
from storage.requests import joined_decision


class PooledSaver(AsyncPostgresSaver):
    """LangGraph's Postgres saver on a pool, without the saver's one lock.

    ``AsyncPostgresSaver`` takes one ``asyncio.Lock`` around every operation, held from taking
    a connection to the end of its statements: it serves a single shared connection too, which
    one coroutine at a time may use. On a pool every operation has a connection of its own, so
    the lock only queued the whole process's checkpoint writes behind each other (16 runs
    stepping at once waited on one lock, and a step's background writes held up its own
    checkpoint). Here each operation takes its own pooled connection and nothing else: the same
    statements, in the same pipeline per operation. What must follow what still does:
    LangGraph chains each checkpoint after the previous one and, with ``durability="sync"``,
    waits for it before the next step; a step's writes are its own rows, keyed by checkpoint
    and task."""

    def __init__(self, pool: AsyncConnectionPool[Connection]) -> None:
        super().__init__(pool)
        self._pool = pool

    @asynccontextmanager
    async def _cursor(self, *, pipeline: bool = False) -> AsyncIterator[AsyncCursor[DictRow]]:
        async with self._pool.connection() as conn, AsyncExitStack() as stack:
            if pipeline:
                # One pipeline; on a libpq without pipeline mode, one transaction.
                await stack.enter_async_context(
                    conn.pipeline() if self.supports_pipeline else conn.transaction()
                )
            async with conn.cursor(binary=True, row_factory=dict_row) as cur:
                yield cur


def make_saver(pool: AsyncConnectionPool[Connection]) -> AsyncPostgresSaver:
    """The saver, sharing the engine's pool (configured as it requires)."""
    return PooledSaver(pool)


class PgResumeChecks:
    """A resume's start under the thread's lock (``begin_resume``): its audit event and what it
    re-reads, interrupts decoded with the saver's serializer."""

    def __init__(self, db: Database, serde: SerializerProtocol) -> None:
        self._db = db
        self._serde = serde

    async def begin(self, job: ResumeJob) -> ResumeCheck:
        params = {
            "job": job.id,
            "run_id": job.run_id,
            "thread_id": job.thread_id,
            "request_id": job.request_id,
        }
        row = await self._db.one("begin_resume", params)
        if row is None:  # the statement returns one row whatever exists
            raise RuntimeError("begin_resume returned no row")
        return ResumeCheck(
            run_status=RunStatus(row["run_status"]) if row["run_status"] else None,
            interrupt_id=self._waiting_on(row["types"] or [], row["blobs"] or [], job.request_id),
            next_sequence=int(row["next_sequence"]),
            started_by=row["started_by"] or "",
            run_input=row["input"] if isinstance(row["input"], dict) else {},
            decided=_decided(row),
        )

    def _waiting_on(self, types: list[str], blobs: list[bytes], request_id: str) -> str | None:
        for type_, blob in zip(types, blobs, strict=True):
            value: Any = self._serde.loads_typed((type_, bytes(blob)))
            for intr in value if isinstance(value, list | tuple) else [value]:
                payload = getattr(intr, "value", None)
                if isinstance(payload, dict) and payload.get("request_id") == request_id:
                    return str(intr.id)
        return None


def _decided(row: Row) -> tuple[PendingCall, DecisionRecord] | None:
    """The job's request and its decision, when the request is decided."""
    if row["id"] is None or row["status"] not in DECIDED_STATUSES:
        return None
    decision = joined_decision(row)
    return (PendingCall.from_row(row), decision) if decision is not None else None
