"""In-memory ports for the conformance harness: the ledger, side-effect log and requests the
tool step needs, held in dictionaries for one harness run.

They exist only so the conformance kit can construct the harness with no arguments. The
exactly-once behaviour of the real ledger (and the request store's supersession rules) is
proven against PostgreSQL in ``tests/integration``; nothing here is meant to stand in for it.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime
from typing import Any

from approvals.model import (
    ApprovalRequest,
    Decision,
    ExecutionStatus,
    RequestStatus,
    ToolExecution,
)
from approvals.ports import NewRequest


class MemoryToolLedger:
    """At most one execution per (run, call), within one process and one harness run."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], ToolExecution] = {}

    async def begin(
        self, *, run_id: str, call_id: str, tool: str, key: str, args_identity: str
    ) -> tuple[bool, ToolExecution]:
        existing = self._rows.get((run_id, call_id))
        if existing is not None:
            return False, existing
        row = ToolExecution(
            run_id=run_id,
            call_id=call_id,
            tool=tool,
            idempotency_key=key,
            args_identity=args_identity,
            status=ExecutionStatus.STARTED,
            result=None,
            error=None,
            started_at=datetime.now(UTC),
            finished_at=None,
        )
        self._rows[(run_id, call_id)] = row
        return True, row

    async def finish(
        self,
        *,
        run_id: str,
        call_id: str,
        status: ExecutionStatus,
        result: Any = None,
        error: str | None = None,
    ) -> ToolExecution:
        row = dataclasses.replace(
            self._rows[(run_id, call_id)],
            status=status,
            result=result,
            error=error,
            finished_at=datetime.now(UTC),
        )
        self._rows[(run_id, call_id)] = row
        return row


class MemorySideEffects:
    """Every real tool invocation, in order (the kit's tools do not write here; the port is
    part of what a graph is given)."""

    def __init__(self) -> None:
        self.effects: list[dict[str, Any]] = []

    async def record(self, *, run_id: str, call_id: str, tool: str, args: dict[str, Any]) -> None:
        self.effects.append({"run_id": run_id, "call_id": call_id, "tool": tool, "args": args})


class MemoryApprovalRequests:
    """Requests keyed by (run, call, identity). The harness answers escalations through its
    own approval slots, so the graph never opens a request here; the port is still part of
    what a graph is given."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str, str], ApprovalRequest] = {}

    async def open(self, new: NewRequest) -> tuple[ApprovalRequest, Decision | None]:
        key = (new.run_id, new.call_id, new.identity)
        request = self._by_key.get(key)
        if request is None:
            request = ApprovalRequest(
                id=str(uuid.uuid4()),
                run_id=new.run_id,
                thread_id=new.thread_id,
                call_id=new.call_id,
                tool=new.tool,
                shown=new.shown,
                args_schema=new.args_schema,
                identity=new.identity,
                reason=new.reason,
                interrupt_id=None,
                state_version=new.state_version,
                requested_by=new.requested_by,
                status=RequestStatus.PENDING,
                created_at=datetime.now(UTC),
                expires_at=new.expires_at,
                decided_at=None,
                approvers=new.approvers,
                allow_edit=new.allow_edit,
            )
            self._by_key[key] = request
        return request, None

    async def get(self, request_id: str) -> ApprovalRequest | None:
        return next((r for r in self._by_key.values() if r.id == request_id), None)
