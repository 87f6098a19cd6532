"""What the contract tests build records from: a run to hang requests on, and new requests."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from approvals.model import EscalationStep, OnExpiry, RunStatus
from approvals.ports import NewRequest, NewRun, Settlement
from tests.contracts.backends import Adapters


def new_run(
    *, thread_id: str | None = None, graph: str = "refund", input: dict[str, Any] | None = None
) -> NewRun:
    """A run alice starts, on a thread of its own unless ``thread_id`` is given."""
    return NewRun(
        run_id=str(uuid.uuid4()),
        thread_id=thread_id or f"thread-{uuid.uuid4().hex[:8]}",
        graph=graph,
        started_by="local:alice",
        input={"message": "refund 1001"} if input is None else input,
    )


async def waiting_run(adapters: Adapters, *, graph: str = "refund") -> NewRun:
    """A run whose first step settled as waiting (every request needs its run)."""
    new = new_run(graph=graph)
    async with adapters.runs.begin(new) as lease:
        lease.settle(Settlement(run_id=new.run_id, status=RunStatus.WAITING))
    return new


def new_request(
    run: NewRun,
    *,
    call_id: str = "call-1",
    identity: str = "identity-a",
    expires_in: timedelta = timedelta(hours=1),
    quorum: int = 1,
    requested_by: str = "local:alice",
    on_expiry: OnExpiry = OnExpiry.REJECT,
    escalation_chain: tuple[EscalationStep, ...] = (),
    **fields: Any,
) -> NewRequest:
    return NewRequest(
        run_id=run.run_id,
        thread_id=run.thread_id,
        call_id=call_id,
        tool="refund",
        shown={"order": 1001, "identity": identity},
        args_schema={"type": "object"},
        identity=identity,
        reason="refunds need a human",
        requested_by=requested_by,
        expires_at=datetime.now(UTC) + expires_in,
        quorum=quorum,
        on_expiry=on_expiry,
        escalation_chain=escalation_chain,
        **fields,
    )


def record(sequence: int) -> dict[str, Any]:
    """An interception record as a settlement carries it
    (``graphs.hooks.governance.record_row``)."""
    return {
        "session_id": "session-1",
        "sequence": sequence,
        "point": "pre_tool_call",
        "decision": "allow",
        "reason": None,
        "interceptor": None,
        "mode": "enforce",
        "input_identity": None,
        "enforced_identity": None,
        "resolved_by": None,
        "record": {"sequence": sequence},
    }
