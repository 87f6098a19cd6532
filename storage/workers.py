"""The live workers (``workers``, migration 0035): each says every few seconds that it is
alive and which graphs it serves, so that a queued resume job whose graph no live worker serves
can be named (``approvals status``, the ``approvals_resume_jobs_unserved`` metric). Statements
are in ``sql/workers.sql``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from storage.db import Database


@dataclass(frozen=True, kw_only=True, slots=True)
class LiveWorker:
    """A worker seen lately: where it runs, what it serves, when it was last seen."""

    id: str
    host: str
    pid: int
    graphs: tuple[str, ...]
    config_digest: str
    started_at: datetime
    seen_at: datetime


class PgWorkers:
    """The ``workers`` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def seen(
        self, worker_id: str, *, host: str, pid: int, graphs: list[str], config_digest: str
    ) -> None:
        """``worker_id`` is alive and serves ``graphs``."""
        await self._db.run(
            "worker_seen",
            {
                "id": worker_id,
                "host": host,
                "pid": pid,
                "graphs": graphs,
                "config_digest": config_digest,
            },
        )

    async def gone(self, worker_id: str) -> None:
        await self._db.run("worker_gone", {"id": worker_id})

    async def forget_stale(self, older_than: float) -> None:
        """Rows of workers not seen for ``older_than`` seconds (killed before they left)."""
        await self._db.run("forget_stale_workers", {"older_than": older_than})

    async def live(self, within: float) -> list[LiveWorker]:
        """The workers seen within the last ``within`` seconds."""
        rows = await self._db.all("live_workers", {"within": within})
        return [
            LiveWorker(
                id=row["id"],
                host=row["host"],
                pid=int(row["pid"]),
                graphs=tuple(row["graphs"]),
                config_digest=row["config_digest"],
                started_at=row["started_at"],
                seen_at=row["seen_at"],
            )
            for row in rows
        ]

    async def unserved_jobs(self, within: float) -> dict[str, int]:
        """The queued resume jobs, by graph, that no worker seen within ``within`` s serves."""
        rows = await self._db.all("unserved_jobs", {"within": within})
        return {str(row["graph"]): int(row["n"]) for row in rows}
