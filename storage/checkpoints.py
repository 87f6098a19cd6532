"""LangGraph's checkpointer on the engine's pool, and a light read of what a thread waits on."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
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


def make_saver(pool: AsyncConnectionPool[Connection]) -> AsyncPostgresSaver:
    """The saver, sharing the engine's pool (configured as it requires)."""
    return AsyncPostgresSaver(pool)


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
