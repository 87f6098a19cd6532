"""The runs of agents an application invokes itself (``graphs.langchain.in_process``), as the
engine's tables hold them: a run row (its requests and decisions reference it) and its audit
entry."""

from __future__ import annotations

from storage.db import Database


class PgLocalRuns:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def ensure(self, *, run_id: str, thread_id: str, graph: str, principal: str) -> None:
        """Record the run unless it is recorded already."""
        params = {"id": run_id, "thread_id": thread_id, "graph": graph, "started_by": principal}
        await self._db.one("ensure_local_run", params)
