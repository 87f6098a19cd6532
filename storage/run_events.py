"""A run's events (status changes, queued resumes, node updates) and its notifications.

Status and resume events are written by triggers (migration 0016); node updates by the runner,
through ``publish``. Every insert NOTIFYs ``EVENTS_CHANNEL`` with the run's id.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import psycopg

from approvals.notify import DeliveryStatus
from storage.db import Database, Row, json, sql
from storage.listening import Listener

log = logging.getLogger("approvals.run_events")

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


class Subscription:
    """One stream's interest in one run's events (``RunEventHub.subscribe``)."""

    def __init__(self, hub: RunEventHub, run_id: str) -> None:
        self._hub = hub
        self.run_id = run_id
        self._woken = asyncio.Event()

    def wake(self) -> None:
        self._woken.set()

    async def wait(self, seconds: float) -> bool:
        """Until an event of the run was published since the last call (``True``; at once if
        one already was) or ``seconds`` pass (``False``)."""
        try:
            await asyncio.wait_for(self._woken.wait(), seconds)
        except TimeoutError:
            return False
        self._woken.clear()
        return True

    def close(self) -> None:
        self._hub.unsubscribe(self)


class RunEventHub:
    """One connection per process LISTENing for run events, waking the streams of the run each
    names: a stream costs the database nothing, however many clients follow runs. If the
    connection drops, every stream is woken (each re-reads its run's events) and the hub
    connects again."""

    def __init__(self, url: str, *, retry_seconds: float = 1.0) -> None:
        self._streams: dict[str, set[Subscription]] = {}
        self._listener = Listener(
            url,
            (sql("listen_run_events"),),
            on_notify=self._notified,
            on_lost=self._lost,
            name="run events",
            retry_seconds=retry_seconds,
        )

    async def subscribe(self, run_id: str) -> Subscription:
        """Listen for ``run_id``'s events; ``DatabaseUnavailable`` when the hub cannot listen
        (so the request fails before its stream starts)."""
        await self._listener.start()
        sub = Subscription(self, run_id)
        self._streams.setdefault(run_id, set()).add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        subs = self._streams.get(sub.run_id)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._streams[sub.run_id]

    async def _notified(self, notify: psycopg.Notify) -> None:
        for sub in self._streams.get(notify.payload, ()):
            sub.wake()

    def _lost(self) -> None:
        # Whatever was published meanwhile is in the table: every stream re-reads.
        for subs in list(self._streams.values()):
            for sub in subs:
                sub.wake()

    async def close(self) -> None:
        await self._listener.close()
