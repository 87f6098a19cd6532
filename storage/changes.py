"""Which approval requests changed lately: what the web app's live view (``/events``) watches.

Each listener asks for the requests created or decided after its last look and keeps only those
its principal may see, so that no one learns of a request by its mere arrival.
"""

from __future__ import annotations

from datetime import datetime

from approvals.model import PendingCall
from storage.db import Database


class PgRequestChanges:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def since(
        self, moment: datetime | None, limit: int = 500
    ) -> tuple[datetime, list[PendingCall]]:
        """The database's clock now, and the requests created or decided after ``moment``
        (``None``: none, only the clock), most recent first, at most ``limit``."""
        rows = await self._db.all(
            "requests_changed_since",
            {"since": moment, "limit": limit},
        )
        now: datetime = rows[0]["db_now"]
        found = [PendingCall.from_row(r) for r in rows if r["id"] is not None]
        return now, found
