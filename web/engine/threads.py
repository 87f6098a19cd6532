"""The LangGraph face's thread use cases: keep a thread a client creates with its metadata,
and read that metadata back where the caller may see the thread (``ThreadUseCases``).

A thread that holds runs is seen by whoever may see its latest run (``ReadUseCases
.visible_thread``): its metadata goes with it. A thread that holds none yet is its creator's
alone: to anyone else it is an unknown id (an idle thread with no metadata), and no one else
may start a run on it, which would hand them the creator's metadata.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from approvals.model import Run
from approvals.principals import Principal
from storage.langgraph_threads import PgLangGraphThreads
from storage.langgraph_threads import StoredThread as StoredThread
from web.engine.adapters import Adapters


class ThreadUseCases:
    """Threads created through the LangGraph face (this module's docstring)."""

    def __init__(self, adapters: Adapters) -> None:
        self._threads = PgLangGraphThreads(adapters.db)

    async def create(
        self, thread_id: str, metadata: dict[str, Any], principal: Principal
    ) -> StoredThread | None:
        """Keep a new thread with ``metadata``, created by ``principal``; ``None`` when the id
        is taken (kept already, or a run was started on it)."""
        return await self._threads.create(thread_id, metadata, by=principal.id)

    async def own(self, thread_id: str, principal: Principal) -> StoredThread | None:
        """The kept thread ``thread_id`` if ``principal`` created it; ``None`` otherwise
        (there is none, or it is another's)."""
        kept = await self._threads.get(thread_id)
        return kept if kept is not None and kept.created_by == principal.id else None

    async def kept_by_another(self, thread_id: str, principal: Principal) -> bool:
        """Whether ``thread_id`` was created by another principal than ``principal`` (asked
        of a thread that holds no run: one may not start the first run on another's)."""
        kept = await self._threads.get(thread_id)
        return kept is not None and kept.created_by != principal.id

    async def metadata(self, runs: Sequence[Run], wanted: dict[str, Any]) -> dict[str, Any]:
        """The metadata of each thread of ``runs`` (each its thread's latest run, which the
        caller may see), by thread id: what was kept, with the run's ``graph_id`` and
        ``assistant_id`` over it; only the threads whose metadata contains ``wanted``."""
        return await self._threads.matching([(r.thread_id, r.graph) for r in runs], wanted)

    async def own_without_runs(
        self,
        principal: Principal,
        wanted: dict[str, Any],
        ids: Sequence[str] | None,
        limit: int,
    ) -> list[StoredThread]:
        """The threads ``principal`` created that hold no run yet, whose metadata contains
        ``wanted`` (among ``ids`` when given), newest first, at most ``limit``."""
        return await self._threads.own_without_runs(principal.id, wanted, ids, limit)
