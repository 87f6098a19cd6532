"""A run's events (status changes, queued resumes, node updates) and its notifications.

Status and resume events are written by triggers (migration 0016); node updates by the runner,
through ``publish``. Every insert NOTIFYs ``EVENTS_CHANNEL`` with the run's id.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import psycopg

from approvals.notify import DeliveryStatus
from storage.db import Database, Row, json, sql, translated_errors

#: The NOTIFY channel; the payload is the run's id.
EVENTS_CHANNEL = "approvals_run_events"


class PgRunEvents:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def publish(self, run_id: str, node: str | None, data: dict[str, Any]) -> None:
        """Record one node update of a run's step and wake whoever streams the run."""
        await self._db.one(
            "publish_run_event", {"run_id": run_id, "node": node, "data": json(data)}
        )

    async def after(self, run_id: str, after: int, limit: int = 500) -> list[Row]:
        """The run's events after event ``after`` (0: from the first), in order."""
        return await self._db.all(
            "run_events_after", {"run_id": run_id, "after": after, "limit": limit}
        )

    async def claim_notifications(
        self, channels: Sequence[str], *, limit: int = 32, lease_seconds: float = 300.0
    ) -> list[Row]:
        """Claim the run notifications owed now on ``channels`` (one per status event and
        channel, across workers), due retries and lapsed leases, each leased to this caller."""
        if not channels:
            return []
        return await self._db.all(
            "claim_run_notifications",
            {"channels": list(channels), "limit": limit, "lease_seconds": lease_seconds},
        )

    async def record_notification(
        self,
        delivery_id: int,
        attempt: int,
        status: DeliveryStatus,
        *,
        error: str | None = None,
        retry_in: float = 0.0,
    ) -> bool:
        """Settle an attempt; ``False`` when the lease had lapsed (another worker holds it)."""
        row = await self._db.one(
            "record_run_notification",
            {
                "id": delivery_id,
                "attempt": attempt,
                "status": status.value,
                "error": error,
                "retry_in": retry_in,
            },
        )
        return row is not None

    async def notifications(self, run_id: str) -> list[Row]:
        """A run's notification deliveries, oldest first."""
        return await self._db.all("run_notifications", {"run_id": run_id})


class RunEventListener:
    """A connection of its own LISTENing for run events, for one stream: held for as long as
    the stream, so it is not taken from the pool that serves requests."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self._conn = conn

    @classmethod
    async def open(cls, url: str, connect_seconds: int = 10) -> RunEventListener:
        with translated_errors():
            conn = await psycopg.AsyncConnection.connect(
                url, autocommit=True, connect_timeout=connect_seconds
            )
            try:
                await conn.execute(sql("listen_run_events"))
            except BaseException:
                await conn.close()
                raise
        return cls(conn)

    async def wait(self, run_id: str, seconds: float) -> bool:
        """Until an event of ``run_id`` is published (``True``) or ``seconds`` pass
        (``False``); other runs' events are skipped."""
        deadline = time.monotonic() + seconds
        with translated_errors():
            while (left := deadline - time.monotonic()) > 0:
                async for notify in self._conn.notifies(timeout=left, stop_after=1):
                    if notify.payload == run_id:
                        return True
        return False

    async def close(self) -> None:
        await self._conn.close()
