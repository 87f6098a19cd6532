"""A run as reports show it: status, requests, tool executions, interception records."""

from __future__ import annotations

import uuid
from typing import Any

from approvals.errors import InvalidRunId, RunNotFound
from approvals.model import RequestStatus
from web.engine import Engine


def valid_run_id(value: str) -> bool:
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


async def run_report(engine: Engine, run_id: str) -> dict[str, Any]:
    if not valid_run_id(run_id):
        raise InvalidRunId(run_id)
    run = await engine.runs.get(run_id)
    if run is None:
        raise RunNotFound(run_id)
    requests = await engine.requests.for_run(run_id)
    executions = await engine.ledger.for_run(run_id)
    interceptions = await engine.audit.interceptions(run_id)
    return {
        "run_id": run.id,
        "thread_id": run.thread_id,
        "graph": run.graph,
        "status": run.status.value,
        "started_by": run.started_by,
        "error": run.error,
        "answer": run.answer,
        "pending": [r.id for r in requests if r.status is RequestStatus.PENDING],
        "requests": [
            {"id": r.id, "call_id": r.call_id, "tool": r.tool, "status": r.status.value}
            for r in requests
        ],
        "tool_executions": [e.to_json() for e in executions],
        # Payload-free (AGENT-HOOKS-0.1 §10.3): decisions, reasons and identities only.
        "interceptions": [
            {
                "sequence": i["sequence"],
                "point": i["point"],
                "decision": i["decision"],
                "reason": i["reason"],
                "interceptor": i["interceptor"],
                "mode": i["mode"],
                "resolved_by": i["resolved_by"],
                "identity": i["enforced_identity"],
                "session_id": i["session_id"],
                "at": i["at"].isoformat(),
            }
            for i in interceptions
        ],
    }
