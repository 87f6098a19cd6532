"""The expiry sweeper: pending requests past their deadline are escalated or expired, once.

One statement per batch (``sweep_expired``) does everything for every due request it takes:
the rows are locked, each is escalated to the next step of its chain or expired (a rejection by
``system:expiry`` with reason ``expired``, its audit entry, a resume job and the wake-up), all
in one transaction. A decision racing the sweep cannot also win: ``decide`` requires
``status = 'pending' AND expires_at > now()``, the sweep ``status = 'pending' AND expires_at <=
now()``, both under the row's lock.
"""

from __future__ import annotations

import logging

from approvals.model import MAX_EXPIRES_IN, SweepResult
from storage.db import Database

log = logging.getLogger("approvals.expiry")

#: Requests handled per statement; a sweep repeats until a batch comes back short.
BATCH = 200


class PgExpiry:
    """Expires (or escalates) pending requests whose deadline has passed."""

    def __init__(self, db: Database, *, batch: int = BATCH) -> None:
        if batch < 1:
            raise ValueError("batch must be at least 1")
        self._db = db
        self._batch = batch

    async def sweep(self) -> SweepResult:
        """Handle every request due now; what was escalated and what expired, by request id."""
        escalated: list[str] = []
        expired: list[str] = []
        while True:
            rows = await self._db.all(
                "sweep_expired",
                {"limit": self._batch, "longest_step": MAX_EXPIRES_IN.total_seconds()},
            )
            for row in rows:
                (expired if row["outcome"] == "expired" else escalated).append(str(row["id"]))
            # A short batch took everything due that no decider holds; the rest (if any) is
            # for the next sweep.
            if len(rows) < self._batch:
                break
        result = SweepResult(escalated=tuple(escalated), expired=tuple(expired))
        if result:
            log.info("expiry: %d request(s) escalated, %d expired", len(escalated), len(expired))
        return result
