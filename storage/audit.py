"""The decision log: reading, verifying and exporting it.

Its entries are written by the statements that make the changes they record (see
``sql/*.sql``), never on their own; the database chains each one to the one before it
and refuses to change or delete any (migration 0005). Walking the chain streams it through a
server-side cursor, so a log of any size is verified in constant memory.

Every event read comes with ``data_unreadable`` (``approvals.audit.marked_data``): data
rewritten outside the engine to nesting too deep to read back is ``None`` and marked, so the
log is still read whole when it is most needed, and the verifier fails on that event.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from approvals.anchor import Anchor, AnchorCheck
from approvals.audit import ChainedEvent, ChainHead, ChainVerifier, Finding, marked_data
from storage.db import (
    Connection,
    Database,
    Row,
    json_text_unreadable,
    read_unreadable_json_as_marker,
    sql,
)

BATCH = 2000


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditFilter:
    """What the operators' view narrows the log to; ``None`` is no filter."""

    run_id: str | None = None
    tool: str | None = None
    principal: str | None = None
    decision: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def params(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "tool": self.tool,
            "principal": self.principal,
            "decision": self.decision,
            "since": self.since,
            "until": self.until,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Verification:
    """The outcome of walking the chain: how many events held, the hash they end on, and
    the first that did not (if any)."""

    events: int
    last_id: int
    head: str
    finding: Finding | None = None
    #: How many anchors were checked (``None``: none were given).
    anchors: int | None = None

    @property
    def ok(self) -> bool:
        return self.finding is None


class PgAuditLog:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def for_run(self, run_id: str) -> list[Row]:
        """Every event of a run, oldest first (``data_unreadable``: as the module says)."""
        rows = await self._db.all("run_audit", {"run_id": run_id}, unreadable_json=True)
        return [marked_data(row) for row in rows]

    async def interceptions(self, run_id: str) -> list[Row]:
        """The run's interception records (payload-free), in sequence order."""
        return await self._db.all("run_interceptions", {"run_id": run_id})

    async def timeline_interceptions(self, run_id: str) -> list[Row]:
        """The run's interception records with when each happened (``happened``, the
        record's own timestamp) and when it was stored (``at``)."""
        return await self._db.all("audit_run_interceptions", {"run_id": run_id})

    async def search(
        self, filters: AuditFilter, *, before: int | None = None, limit: int = 50
    ) -> list[Row]:
        """One page of events matching ``filters``, newest first, older than ``before``
        (``data_unreadable``: as the module says)."""
        params = filters.params() | {"before": before, "limit": limit}
        rows = await self._db.all("audit_search", params, unreadable_json=True)
        return [marked_data(row) for row in rows]

    async def verify(self, anchors: list[Anchor] | None = None) -> Verification:
        """Walk the chain up to its head in one snapshot and recompute every link; with
        ``anchors``, also check that every anchored event still has its anchored hash (a
        rewrite that recomputed the hashes and moved the head passes the walk, not this)."""
        check = AnchorCheck(anchors or [])
        async with self._snapshot() as conn:
            row = await (await conn.execute(sql("audit_head"))).fetchone()
            if row is None:
                raise RuntimeError("the decision log has no chain head; run `approvals db upgrade`")
            head = ChainHead(
                last_id=row["last_id"], hash=row["hash"], legacy_until=row["legacy_until"]
            )
            verifier = ChainVerifier(head)
            async for row in _stream(conn, "audit_chain", {}):
                row["data_unreadable"] = json_text_unreadable(row["data_text"])
                event = ChainedEvent.from_row(row)
                if verifier.feed(event) is not None:
                    break
                check.see(event.id, event.hash)
            # A broken link names the event itself; an anchor only bounds where the rewrite is.
            finding = verifier.finish() or check.finish(verifier.last_id)
        return Verification(
            events=verifier.count,
            last_id=verifier.last_id,
            head=verifier.head_hash,
            finding=finding,
            anchors=check.count if anchors is not None else None,
        )

    async def export(
        self, *, since: datetime | None = None, run_id: str | None = None
    ) -> AsyncGenerator[Row, None]:
        """Every event (from ``since``, of ``run_id``), oldest first, streamed
        (``data_unreadable``: as the module says)."""
        params = {"since": since, "run_id": run_id}
        async with self._snapshot() as conn:
            async for row in _stream(conn, "audit_export", params, unreadable_json=True):
                yield marked_data(row)

    @asynccontextmanager
    async def _snapshot(self) -> AsyncIterator[Connection]:
        """A read-only, repeatable-read transaction on a connection of its own: the head and
        the events it covers are read as of one moment, while writers go on."""
        async with self._db.transaction() as conn:
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield conn


async def _stream(
    conn: Connection, name: str, params: dict[str, Any], *, unreadable_json: bool = False
) -> AsyncIterator[Row]:
    async with conn.cursor(name=f"approvals_{name}") as cursor:
        if unreadable_json:
            read_unreadable_json_as_marker(cursor)
        cursor.itersize = BATCH
        await cursor.execute(sql(name), params)
        async for row in cursor:
            yield row
