"""Approval requests and the atomic consumption of a decision."""

from __future__ import annotations

import uuid
from typing import Any

from approvals.errors import RequestNotFound, RequestNotPending
from approvals.model import ApprovalRequest, Decision, DecisionKind, RequestStatus
from approvals.ports import NewRequest
from storage.db import Database, json

_STATUS_OF_KIND = {
    DecisionKind.APPROVE: RequestStatus.APPROVED,
    DecisionKind.EDIT: RequestStatus.APPROVED,
    DecisionKind.REJECT: RequestStatus.REJECTED,
}


def _decision_of(row: dict[str, Any]) -> Decision | None:
    """The decision joined to a request row (its columns prefixed ``d_``), if there is one."""
    if row["d_id"] is None:
        return None
    joined = {key[2:]: value for key, value in row.items() if key.startswith("d_")}
    return Decision.from_row(
        joined | {"request_id": row["id"], "run_id": row["run_id"], "call_id": row["call_id"]}
    )


class PgApprovalRequests:
    """Pending-call records, keyed by (run, call, content identity)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def open(self, new: NewRequest) -> tuple[ApprovalRequest, Decision | None]:
        params = {
            "id": str(uuid.uuid4()),
            "run_id": new.run_id,
            "thread_id": new.thread_id,
            "call_id": new.call_id,
            "tool": new.tool,
            "shown": json(new.shown),
            "args_schema": json(new.args_schema),
            "identity": new.identity,
            "reason": new.reason,
            "state_version": new.state_version,
            "requested_by": new.requested_by,
            "expires_at": new.expires_at,
            "approvers": list(new.approvers),
            "allow_edit": new.allow_edit,
        }
        row = await self._db.one("open_request", params)
        if row is None:
            # Another session recorded the same call between our snapshot and our insert:
            # its row is committed now, so asking again finds it.
            row = await self._db.one("open_request", params)
        assert row is not None, "open_request returned no row twice"
        return ApprovalRequest.from_row(row), _decision_of(row)

    async def get(self, request_id: str) -> ApprovalRequest | None:
        row = await self._db.one("get_request", {"id": request_id})
        return ApprovalRequest.from_row(row) if row else None

    async def search(
        self, status: RequestStatus | None = None, limit: int = 200
    ) -> list[ApprovalRequest]:
        rows = await self._db.all(
            "list_requests", {"status": status.value if status else None, "limit": limit}
        )
        return [ApprovalRequest.from_row(r) for r in rows]

    async def decision_of(self, request_id: str) -> tuple[str, Decision | None]:
        """The decision made on a request, if any."""
        row = await self._db.one("request_decision", {"id": request_id})
        return request_id, Decision.from_row(row) if row else None

    async def version(self) -> str:
        """A mark that changes when a request is created or decided."""
        row = await self._db.one("requests_version", {})
        return f"{row['n']}:{row['at']}" if row else ""

    async def for_run(self, run_id: str) -> list[ApprovalRequest]:
        rows = await self._db.all("run_requests", {"run_id": run_id})
        return [ApprovalRequest.from_row(r) for r in rows]


class PgDecisions:
    """Consumes a pending request exactly once, in one statement."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def decide(
        self,
        request_id: str,
        *,
        kind: DecisionKind,
        principal: str,
        reason: str | None,
        args: dict[str, Any] | None,
        args_identity: str | None,
    ) -> Decision:
        row = await self._db.one(
            "decide",
            {
                "id": str(uuid.uuid4()),
                "request_id": request_id,
                "status": _STATUS_OF_KIND[kind].value,
                "kind": kind.value,
                "principal": principal,
                "reason": reason,
                "args": json(args) if args is not None else None,
                "args_identity": args_identity,
            },
        )
        if row is not None:
            return Decision.from_row(row)
        state = await self._db.one("request_status", {"id": request_id})
        if state is None:
            raise RequestNotFound(request_id)
        expired = state["status"] == RequestStatus.PENDING and state["expired"]
        raise RequestNotPending(request_id, "expired" if expired else state["status"])
