"""The LangGraph Server face's threads on PostgreSQL (``PgLangGraphThreads``): the metadata a
client gives a thread when it creates it (``POST /langgraph/threads``), read back and searched
by containment (``@>``).

A row of ``langgraph_threads`` (migration 0033) is a thread created through the face; a thread
is otherwise its runs' (``runs.thread_id``), and the thread's metadata as the face shows it is
the stored metadata with the ``graph_id`` and ``assistant_id`` of its latest run over it. Who
may see a thread is decided above this module (``web.engine.threads``). Retention deletes a
row with its thread's runs (``prune_threads``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from storage.db import Database, json


@dataclass(frozen=True, kw_only=True, slots=True)
class StoredThread:
    """A thread created through the LangGraph face."""

    thread_id: str
    metadata: dict[str, Any]
    #: The principal id that created it.
    created_by: str
    created_at: datetime


def _stored(row: dict[str, Any]) -> StoredThread:
    return StoredThread(
        thread_id=row["thread_id"],
        metadata=dict(row["metadata"]),
        created_by=row["created_by"],
        created_at=row["created_at"],
    )


class PgLangGraphThreads:
    """The ``langgraph_threads`` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(
        self, thread_id: str, metadata: dict[str, Any], *, by: str
    ) -> StoredThread | None:
        """Keep a new thread and its metadata, created by principal ``by``; ``None`` when the
        id is taken (a thread already kept, or one a run was started on)."""
        row = await self._db.one(
            "create_langgraph_thread",
            {"thread_id": thread_id, "metadata": json(metadata), "by": by},
        )
        return None if row is None else _stored(row)

    async def get(self, thread_id: str) -> StoredThread | None:
        row = await self._db.one("langgraph_thread", {"thread_id": thread_id})
        return None if row is None else _stored(row)

    async def matching(
        self, graphs: Sequence[tuple[str, str]], wanted: dict[str, Any]
    ) -> dict[str, dict[str, Any]]:
        """For each ``(thread_id, graph)`` (a thread and its latest run's graph), the thread's
        metadata (stored, with ``graph_id`` and ``assistant_id`` over it), kept when it
        contains ``wanted``."""
        if not graphs:
            return {}
        given = [{"thread_id": t, "graph": g} for t, g in graphs]
        rows = await self._db.all(
            "langgraph_threads_matching", {"threads": json(given), "wanted": json(wanted)}
        )
        return {row["thread_id"]: dict(row["metadata"]) for row in rows}

    async def own_without_runs(
        self, by: str, wanted: dict[str, Any], ids: Sequence[str] | None, limit: int
    ) -> list[StoredThread]:
        """The threads principal ``by`` created that hold no run yet, whose metadata contains
        ``wanted`` (among ``ids``, when given), newest first, at most ``limit``."""
        rows = await self._db.all(
            "own_langgraph_threads_without_runs",
            {
                "by": by,
                "wanted": json(wanted),
                "ids": None if ids is None else list(ids),
                "limit": limit,
            },
        )
        return [_stored(row) for row in rows]
