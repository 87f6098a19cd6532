"""In-memory ports for the conformance harness: the ledger, side-effect log and requests the
tool step needs, held in dictionaries for one harness run.

They exist only so the conformance kit can construct the harness with no arguments. The
exactly-once behaviour of the real ledger (and the request store's supersession rules) is
proven against PostgreSQL in ``tests/integration``; nothing here is meant to stand in for it.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from approvals.memory import MemorySideEffects, MemoryToolLedger
from approvals.model import ApprovalRequest, Decision, RequestStatus
from approvals.ports import NewRequest

__all__ = ["MemoryApprovalRequests", "MemorySideEffects", "MemoryToolLedger"]


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
