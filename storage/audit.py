"""Reading the audit log. Its entries are written by the statements that make the changes they
record (see ``sql/queries.sql``), never on their own."""

from __future__ import annotations

from storage.db import Database, Row


class PgAuditLog:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def for_run(self, run_id: str) -> list[Row]:
        """Every event of a run, oldest first."""
        return await self._db.all("run_audit", {"run_id": run_id})

    async def interceptions(self, run_id: str) -> list[Row]:
        """The run's interception records (payload-free), in sequence order."""
        return await self._db.all("run_interceptions", {"run_id": run_id})
