"""Statements that are not the engine's own, for code outside the core that keeps its own
tables (the examples' side-effect log, ``graphs.examples.effects``): the host gives it this
adapter as its ``Statements`` port. The engine's own statements stay in ``sql/*.sql``."""

from __future__ import annotations

from typing import Any

from storage.db import Database, Row


class PgStatements:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def rows(self, statement: str, params: dict[str, Any]) -> list[Row]:
        """Run ``statement`` (written by the caller's code, never from input) on a pooled
        connection; the rows it returns, none for a statement that returns none."""
        async with self._db.connection() as conn:
            cursor = await conn.execute(statement, params)
            return await cursor.fetchall() if cursor.description else []
