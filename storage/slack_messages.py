"""The Slack messages posted for requests (``slack_messages``, migration 0034), and the
updates they owe (``PgSlackMessages``).

The Slack app's channel records each message ``chat.postMessage`` posted (its channel and ts).
Once the request no longer waits for that message (decided by any route, expired, superseded,
cancelled, or escalated past the message's approvers) the notifier claims it, updates it
(``chat.update``) and settles the attempt: retried with backoff, under a lease, as a post is.
A message goes with its request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from storage.db import Database

#: What an attempt to update a message came to.
UPDATED = "updated"
RETRY = "retry"
FAILED = "failed"
SKIPPED = "skipped"


@dataclass(frozen=True, kw_only=True, slots=True)
class OwedUpdate:
    """A message claimed for an update: which, of which request, the attempt's number."""

    id: int
    request_id: str
    escalation_level: int
    channel: str
    ts: str
    attempt: int

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> OwedUpdate:
        return cls(
            id=int(row["id"]),
            request_id=str(row["request_id"]),
            escalation_level=int(row["escalation_level"]),
            channel=str(row["channel"]),
            ts=str(row["ts"]),
            attempt=int(row["attempts"]),
        )


class PgSlackMessages:
    """The posted messages, and the claim and record of their updates."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def posted(
        self, request_id: str, *, escalation_level: int, target: str, channel: str, ts: str
    ) -> None:
        """Record a message posted to ``target`` (the configured channel), which Slack
        answered with ``channel`` and ``ts``."""
        await self._db.run(
            "record_slack_message",
            {
                "request_id": request_id,
                "escalation_level": escalation_level,
                "target": target,
                "channel": channel,
                "ts": ts,
            },
        )

    async def posted_targets(self, request_id: str, escalation_level: int) -> set[str]:
        """The configured channels the request was posted to at ``escalation_level``."""
        rows = await self._db.all(
            "slack_posted_targets",
            {"request_id": request_id, "escalation_level": escalation_level},
        )
        return {str(r["target"]) for r in rows}

    async def claim(self, *, limit: int = 32, lease_seconds: float = 300.0) -> list[OwedUpdate]:
        """Claim the messages owed an update now, each leased for ``lease_seconds``."""
        rows = await self._db.all(
            "claim_slack_updates", {"limit": limit, "lease_seconds": lease_seconds}
        )
        return [OwedUpdate.from_row(r) for r in rows]

    async def record(
        self,
        update: OwedUpdate,
        status: str,
        *,
        error: str | None = None,
        retry_in: float = 0.0,
    ) -> bool:
        """Settle an attempt (``UPDATED``, ``RETRY`` in ``retry_in`` seconds, ``FAILED``,
        ``SKIPPED``); ``False`` when the lease had lapsed and another worker holds it."""
        row = await self._db.one(
            "record_slack_update",
            {
                "id": update.id,
                "attempt": update.attempt,
                "status": status,
                "error": error,
                "retry_in": retry_in,
            },
        )
        return row is not None

    async def settled(self, channel: str, ts: str) -> None:
        """The message at ``channel``/``ts`` was updated to show how its request ended (by
        the interactions face, after a click): no update is owed any more."""
        await self._db.run("slack_message_settled", {"channel": channel, "ts": ts})

    async def for_request(self, request_id: str) -> list[dict[str, Any]]:
        """A request's messages, oldest first."""
        return await self._db.all("request_slack_messages", {"request_id": request_id})
