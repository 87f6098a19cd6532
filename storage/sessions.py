"""Web sessions on PostgreSQL: one row per signed-in browser, found by a hash of its id.

The session id (random, 256 bits) lives only in the browser's signed cookie; the table keeps
its SHA-256, so reading the table (a backup, a replica, an insider's ``SELECT``) signs no one
in. A row ends when its owner signs out, when an operator ends the principal's sessions, when
it expires, or when its local account is disabled or changes groups or password (a trigger on
``users``, revision 0010).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from approvals.principals import Principal, Via
from storage.db import Database


def session_hash(session_id: str) -> str:
    """What the table stores for a session id."""
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionRecord:
    """A live session: who it signs in, since when, until when (never its id)."""

    principal: Principal
    account: str | None
    created_at: datetime
    expires_at: datetime
    last_seen_at: datetime

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> SessionRecord:
        return cls(
            principal=Principal(
                id=row["principal"],
                name=row["name"],
                via=Via(row["via"]),
                groups=frozenset(row["groups"]),
            ),
            account=row["account"],
            created_at=row["created_at"],
            expires_at=row["expires_at"],
            last_seen_at=row["last_seen_at"],
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "principal": self.principal.id,
            "name": self.principal.name,
            "via": self.principal.via.value,
            "groups": sorted(self.principal.groups),
            "created_at": self.created_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
            "last_seen_at": self.last_seen_at.isoformat(),
        }


class PgSessions:
    """Start, look up and end web sessions."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def start(self, session_id: str, principal: Principal, *, ttl_seconds: int) -> None:
        """Record a new session for ``principal``, valid for ``ttl_seconds``."""
        if principal.via not in (Via.PASSWORD, Via.OIDC):
            raise ValueError(f"a web session signs in a person, not {principal.via.value}")
        await self._db.one(
            "create_web_session",
            {
                "id_hash": session_hash(session_id),
                "principal": principal.id,
                "name": principal.name,
                "via": principal.via.value,
                "account": principal.name if principal.via is Via.PASSWORD else None,
                "groups": sorted(principal.groups),
                "ttl_seconds": ttl_seconds,
            },
        )

    async def get(self, session_id: str) -> SessionRecord | None:
        """The live session with this id, or ``None`` (unknown, ended, expired, or its account
        disabled)."""
        row = await self._db.one("web_session", {"id_hash": session_hash(session_id)})
        return SessionRecord.from_row(row) if row else None

    async def end(self, session_id: str) -> bool:
        """End one session (sign-out); ``False`` when it had already ended."""
        return (
            await self._db.one("end_web_session", {"id_hash": session_hash(session_id)}) is not None
        )

    async def end_principal(self, principal: str, *, by: str | None = None) -> int:
        """End every session of ``principal`` (a principal id, e.g. ``oidc:ISSUER#SUBJECT``);
        how many there were. Writes an audit entry when there was any."""
        row = await self._db.one("end_principal_sessions", {"principal": principal, "by": by})
        return int(row["ended"]) if row else 0

    async def live(self, principal: str | None = None, limit: int = 1000) -> list[SessionRecord]:
        """Live sessions, newest first: all of them or one principal's."""
        rows = await self._db.all("list_web_sessions", {"principal": principal, "limit": limit})
        return [SessionRecord.from_row(r) for r in rows]
