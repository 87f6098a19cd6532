"""The append-only audit log of everything that happened to a call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from storage.db import Connection, Database, Row, json


class PgAuditLog:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def append(
        self,
        kind: str,
        *,
        run_id: str | None = None,
        request_id: str | None = None,
        call_id: str | None = None,
        principal: str | None = None,
        data: Mapping[str, Any] | None = None,
        conn: Connection | None = None,
    ) -> None:
        await self._db.run(
            "insert_audit",
            {
                "kind": kind,
                "run_id": run_id,
                "request_id": request_id,
                "call_id": call_id,
                "principal": principal,
                "data": json(dict(data or {})),
            },
            conn,
        )

    async def for_run(self, run_id: str) -> list[Row]:
        return await self._db.all("run_audit", {"run_id": run_id})
