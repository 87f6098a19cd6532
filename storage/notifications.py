"""The notification deliveries and their attempt log."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from approvals.notify import DeliveryStatus
from storage.db import Database, Row


class PgNotifications:
    """Deliveries keyed by (request, channel, escalation level), claimed by one worker each."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def claim(
        self, channels: Sequence[str], *, limit: int = 32, lease_seconds: float = 300.0
    ) -> list[Row]:
        """Claim what is owed now: new deliveries for pending requests at their current
        escalation level, due retries and lapsed leases. Each row is leased to this caller
        for ``lease_seconds`` (``attempts`` is the number of the attempt to make)."""
        if not channels:
            return []
        return await self._db.all(
            "claim_notifications",
            {"channels": list(channels), "limit": limit, "lease_seconds": lease_seconds},
        )

    async def record(
        self,
        delivery_id: int,
        attempt: int,
        status: DeliveryStatus,
        *,
        response_code: int | None = None,
        error: str | None = None,
        retry_in: float = 0.0,
    ) -> bool:
        """Log an attempt and settle its delivery (``retry``: due again in ``retry_in``
        seconds). ``False`` when the lease had lapsed and another worker holds the delivery."""
        row = await self._db.one(
            "record_notification_attempt",
            {
                "id": delivery_id,
                "attempt": attempt,
                "status": status.value,
                "response_code": response_code,
                "error": error,
                "retry_in": retry_in,
            },
        )
        return row is not None

    async def for_request(self, request_id: str) -> list[dict[str, Any]]:
        """A request's deliveries, by escalation level and channel."""
        return await self._db.all("request_notifications", {"request_id": request_id})

    async def deliveries(
        self, *, request_id: str | None = None, status: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """The newest ``limit`` deliveries, optionally of one request and/or in one status."""
        return await self._db.all(
            "notification_deliveries",
            {"request_id": request_id, "status": status, "limit": limit},
        )

    async def attempts(self, request_id: str) -> list[dict[str, Any]]:
        """The delivery log of a request: every attempt on every channel, in order."""
        return await self._db.all("request_notification_attempts", {"request_id": request_id})
