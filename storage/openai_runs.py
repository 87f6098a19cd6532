"""The OpenAI Agents SDK host's server-side state: each paused run's serialized ``RunState``.

The state is stored as the exact text the SDK's ``to_json`` was dumped to, with its version
(the host's keyed MAC of the row, ``graphs.hosts.openai.sealing``: this module never computes
or checks it). The run's pending requests carry the version as their ``state_version``; a
resume refuses a row whose version is not the host's MAC of it. Statements are in
``sql/openai_runs.sql``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from storage.db import Database, Row, json


@dataclass(frozen=True, kw_only=True, slots=True)
class StoredRunState:
    """A run's stored ``RunState`` text, its recorded version, the calls it waits on."""

    run_id: str
    agent: str
    state: str
    version: str
    #: ``(call_id, request_id)`` of each call the run waits on.
    waiting: tuple[tuple[str, str], ...]
    #: Where the run stood when the state was stored.
    status: str
    answer: str | None
    error: str | None
    saved_at: datetime

    @classmethod
    def from_row(cls, row: Row) -> StoredRunState:
        return cls(
            run_id=str(row["run_id"]),
            agent=row["agent"],
            state=row["state"],
            version=row["version"],
            waiting=tuple((str(w["call_id"]), str(w["request_id"])) for w in row["waiting"]),
            status=row["status"],
            answer=row["answer"],
            error=row["error"],
            saved_at=row["saved_at"],
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class RequestDecision:
    """A request as a resume re-reads it, with the decision made on it."""

    request_id: str
    call_id: str
    tool: str
    identity: str
    status: str
    state_version: str | None
    kind: str | None
    reason: str | None
    decided_by: str | None


class PgOpenAIRunStates:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def save(
        self,
        *,
        run_id: str,
        agent: str,
        state: str,
        version: str,
        waiting: tuple[tuple[str, str], ...],
        status: str,
        answer: str | None = None,
        error: str | None = None,
    ) -> None:
        await self._db.run(
            "save_openai_state",
            {
                "run_id": run_id,
                "agent": agent,
                "state": state,
                "version": version,
                "waiting": json([{"call_id": c, "request_id": r} for c, r in waiting]),
                "request_ids": [r for _, r in waiting],
                "status": status,
                "answer": answer,
                "error": error,
            },
        )

    async def load(self, run_id: str) -> StoredRunState | None:
        row = await self._db.one("load_openai_state", {"run_id": run_id})
        return StoredRunState.from_row(row) if row else None

    async def decision(self, request_id: str) -> RequestDecision | None:
        row = await self._db.one("openai_request_decision", {"request_id": request_id})
        if row is None:
            return None
        return RequestDecision(
            request_id=str(row["id"]),
            call_id=row["call_id"],
            tool=row["tool"],
            identity=row["identity"],
            status=row["status"],
            state_version=row["state_version"],
            kind=row["decision_kind"],
            reason=row["decision_reason"],
            decided_by=row["decided_by"],
        )

    async def record_refused(
        self,
        *,
        run_id: str,
        request_id: str,
        call_id: str,
        expected: str | None,
        found: str,
        reason: str,
        state_sha256: str,
    ) -> None:
        await self._db.run(
            "record_openai_state_refused",
            {
                "run_id": run_id,
                "request_id": request_id,
                "call_id": call_id,
                "expected": expected,
                "data": json(
                    {
                        "found": found,
                        "expected": expected,
                        "reason": reason,
                        "state_sha256": state_sha256,
                    }
                ),
            },
        )
