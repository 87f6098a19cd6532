"""The conversation history of OpenAI Agents SDK sessions, kept in PostgreSQL by thread.

An agent registered with ``OpenAIAgent(agent, session="postgres")`` runs with the SDK session
of its run's thread (``session_id`` is the thread id): every run of the thread reads the items
the runs before it added, and adds its own (its input, the model's items, the tools' outputs),
across pauses. ``PgOpenAISession`` implements the SDK's ``Session`` protocol structurally, so
that storage never imports the SDK. Each item is one row of ``openai_session_items``, in the
order added, marked with the run that added it; statements are in
``sql/openai_sessions.sql``.
"""

from __future__ import annotations

from typing import Any

from storage.db import Database, json


class PgOpenAISession:
    """One thread's SDK session (``agents.memory.Session``): its items are the thread's rows,
    and those it adds are marked with ``run_id``. The runs of a thread hold its lock while
    they run: one session object is never used by two of them at once."""

    #: The SDK's per-session settings (``SessionSettings``): none, the run's own apply.
    session_settings: Any = None

    def __init__(self, db: Database, *, thread_id: str, run_id: str) -> None:
        self._db = db
        self.session_id = thread_id
        self._run_id = run_id

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The thread's items, oldest first; only the latest ``limit`` when given."""
        rows = await self._db.all(
            "openai_session_items", {"thread_id": self.session_id, "limit": limit}
        )
        return [row["item"] for row in rows]

    async def add_items(self, items: list[Any]) -> None:
        """Append ``items`` (JSON objects: the SDK's input items) to the thread's session."""
        if not items:
            return
        await self._db.run(
            "add_openai_session_items",
            {"thread_id": self.session_id, "run_id": self._run_id, "items": json(list(items))},
        )

    async def pop_item(self) -> Any | None:
        """Remove and return the thread's most recent item (``None``: it has none)."""
        row = await self._db.one("pop_openai_session_item", {"thread_id": self.session_id})
        return row["item"] if row is not None else None

    async def clear_session(self) -> None:
        """Remove every item of the thread's session."""
        await self._db.run("clear_openai_session", {"thread_id": self.session_id})


class PgOpenAISessions:
    """Where the host finds a thread's session (``graphs.hosts.openai.ports.OpenAISessions``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def session(self, *, thread_id: str, run_id: str) -> PgOpenAISession:
        """The session of ``thread_id``, adding items as ``run_id``'s."""
        return PgOpenAISession(self._db, thread_id=thread_id, run_id=run_id)
