"""Approval requests and the atomic consumption of a decision."""

from __future__ import annotations

import uuid
from typing import Any

from approvals.errors import RequestNotFound, RequestNotPending
from approvals.model import ApprovalRequest, Decision, DecisionKind, RequestStatus
from approvals.ports import NewRequest
from storage.audit import PgAuditLog
from storage.db import Database, json

_STATUS_OF_KIND = {
    DecisionKind.APPROVE: RequestStatus.APPROVED,
    DecisionKind.EDIT: RequestStatus.APPROVED,
    DecisionKind.REJECT: RequestStatus.REJECTED,
}


class PgApprovalRequests:
    """Pending-call records, keyed by (run, call, content identity)."""

    def __init__(self, db: Database, audit: PgAuditLog) -> None:
        self._db = db
        self._audit = audit

    async def record_pending(self, new: NewRequest) -> ApprovalRequest:
        async with self._db.transaction() as conn:
            superseded = await self._db.all(
                "supersede_other_pending",
                {"run_id": new.run_id, "call_id": new.call_id, "identity": new.identity},
                conn,
            )
            for old in superseded:
                await self._audit.append(
                    "request.superseded",
                    run_id=new.run_id,
                    request_id=str(old["id"]),
                    call_id=new.call_id,
                    data={"by_identity": new.identity},
                    conn=conn,
                )
            row = await self._db.one(
                "upsert_request",
                {
                    "id": str(uuid.uuid4()),
                    "run_id": new.run_id,
                    "thread_id": new.thread_id,
                    "call_id": new.call_id,
                    "tool": new.tool,
                    "shown": json(new.shown),
                    "args_schema": json(new.args_schema),
                    "identity": new.identity,
                    "reason": new.reason,
                    "requested_by": new.requested_by,
                    "expires_at": new.expires_at,
                },
                conn,
            )
            assert row is not None
            if row["inserted"]:
                await self._audit.append(
                    "request.created",
                    run_id=new.run_id,
                    request_id=str(row["id"]),
                    call_id=new.call_id,
                    principal=new.requested_by,
                    data={"tool": new.tool, "identity": new.identity},
                    conn=conn,
                )
        return ApprovalRequest.from_row(row)

    async def find(self, run_id: str, call_id: str, identity: str) -> ApprovalRequest | None:
        row = await self._db.one(
            "find_request", {"run_id": run_id, "call_id": call_id, "identity": identity}
        )
        return ApprovalRequest.from_row(row) if row else None

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

    async def for_run(self, run_id: str) -> list[ApprovalRequest]:
        rows = await self._db.all("run_requests", {"run_id": run_id})
        return [ApprovalRequest.from_row(r) for r in rows]

    async def decision_for(self, request_id: str) -> Decision | None:
        row = await self._db.one("decision_for_request", {"request_id": request_id})
        return Decision.from_row(row) if row else None

    async def attach_interrupt(
        self, request_id: str, interrupt_id: str, state_version: str | None
    ) -> None:
        await self._db.run(
            "attach_interrupt",
            {"id": request_id, "interrupt_id": interrupt_id, "state_version": state_version},
        )


class PgDecisions:
    """Consumes a pending request exactly once, in one transaction."""

    def __init__(self, db: Database, audit: PgAuditLog) -> None:
        self._db = db
        self._audit = audit

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
        async with self._db.transaction() as conn:
            request = await self._db.one(
                "consume_request",
                {"id": request_id, "status": _STATUS_OF_KIND[kind].value},
                conn,
            )
            if request is None:
                state = await self._db.one("request_status", {"id": request_id}, conn)
                if state is None:
                    raise RequestNotFound(request_id)
                status = (
                    "expired"
                    if state["status"] == "pending" and state["expired"]
                    else state["status"]
                )
                raise RequestNotPending(request_id, status)
            decision = await self._db.one(
                "insert_decision",
                {
                    "id": str(uuid.uuid4()),
                    "request_id": request_id,
                    "run_id": request["run_id"],
                    "call_id": request["call_id"],
                    "kind": kind.value,
                    "principal": principal,
                    "reason": reason,
                    "args": json(args) if args is not None else None,
                    "args_identity": args_identity,
                },
                conn,
            )
            assert decision is not None
            run_id = str(request["run_id"])
            await self._audit.append(
                "request.decided",
                run_id=run_id,
                request_id=request_id,
                call_id=request["call_id"],
                principal=principal,
                data={
                    "decision": kind.value,
                    "reason": reason,
                    "identity": request["identity"],
                    "args_identity": args_identity,
                    "state_version": request["state_version"],
                },
                conn=conn,
            )
            await self._db.run(
                "enqueue_resume",
                {
                    "request_id": request_id,
                    "decision_id": decision["id"],
                    "run_id": run_id,
                    "thread_id": request["thread_id"],
                },
                conn,
            )
            await self._db.run("notify_resume", {"run_id": run_id}, conn)
        return Decision.from_row(decision)
