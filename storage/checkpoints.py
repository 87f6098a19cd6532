"""LangGraph's checkpointer on the engine's pool, and a light read of what a thread waits on."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg_pool import AsyncConnectionPool

from storage.db import Connection, Database


def make_saver(pool: AsyncConnectionPool[Connection]) -> AsyncPostgresSaver:
    """The saver, sharing the engine's pool (configured as it requires)."""
    return AsyncPostgresSaver(pool)


class PgPendingInterrupts:
    """Which interrupt of a thread's latest checkpoint belongs to an approval request."""

    def __init__(self, db: Database, serde: SerializerProtocol) -> None:
        self._db = db
        self._serde = serde

    async def find(self, thread_id: str, request_id: str) -> str | None:
        for row in await self._db.all("latest_interrupt_writes", {"thread_id": thread_id}):
            value: Any = self._serde.loads_typed((row["type"], bytes(row["blob"])))
            for intr in value if isinstance(value, list | tuple) else [value]:
                payload = getattr(intr, "value", None)
                if isinstance(payload, dict) and payload.get("request_id") == request_id:
                    return str(intr.id)
        return None
