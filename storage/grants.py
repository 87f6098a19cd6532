"""Standing grants in PostgreSQL (``approvals.grants``): made beside an "always" decision,
used by the approval slot, listed and revoked by operators; each with its audit event."""

from __future__ import annotations

import uuid
from typing import Any

from approvals.decision_kinds import Ruling
from approvals.grants import Grant, Offer
from storage.db import Database, json


class PgStandingGrants:
    """The ``standing_grants`` table and the audit events of its changes."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def make_grant(
        self, *, request_id: str, decision_id: str, ruling: Ruling, offer: Offer, principal: str
    ) -> Grant:
        row = await self._db.one(
            "make_grant",
            {
                "id": str(uuid.uuid4()),
                "request_id": request_id,
                "decision_id": decision_id,
                "rule": offer.rule,
                "ruling": ruling.value,
                "within": json(offer.within.to_json()),
                "principal": principal,
            },
        )
        assert row is not None, "a decided request made no grant"
        return Grant.from_row(row)

    async def use_grant(
        self,
        *,
        run_id: str,
        tool: str,
        rule: str,
        call_id: str,
        identity: str,
        args: dict[str, Any],
    ) -> Grant | None:
        call = {"run_id": run_id, "call_id": call_id, "identity": identity}
        earlier = await self._db.one("grant_used_for", call)
        if earlier is not None:
            return Grant.from_row(earlier)
        rows = await self._db.all("live_grants", {"run_id": run_id, "tool": tool, "rule": rule})
        for grant in map(Grant.from_row, rows):
            if not grant.within.covers(args):
                continue
            used = await self._db.one("use_grant", {**call, "id": grant.id})
            if used is not None:
                return Grant.from_row(used)
        return None

    async def grants_of(self, run_id: str) -> list[Grant]:
        return [Grant.from_row(r) for r in await self._db.all("run_grants", {"run_id": run_id})]

    async def revoke_grant(self, grant_id: str, *, principal: str) -> Grant | None:
        row = await self._db.one("revoke_grant", {"id": grant_id, "principal": principal})
        return Grant.from_row(row) if row is not None else None

    async def grant(self, grant_id: str) -> Grant | None:
        """One grant, live or revoked (``grant_id`` a well-formed uuid)."""
        row = await self._db.one("grant_by_id", {"id": grant_id})
        return Grant.from_row(row) if row is not None else None
