"""One run's timeline (``/runs/{run_id}``), for operators: its audit events and interception
records as one list, by time, from start to finish.

Operators only, like the decision log (``web.faces.pages.audit``): anyone else gets the 404 of a
page that does not exist.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from approvals.audit import UNREADABLE_DATA
from web.deps import EngineDep, SignedIn
from web.engine.workers import waits_for_worker
from web.faces.pages.audit import operator_only, run_id_of, summary, time_of
from web.faces.pages.rendering import render

#: One run's timeline page.
router = APIRouter(include_in_schema=False)


@router.get("/runs/{run_id}")
async def run_timeline(
    request: Request, run_id: str, session: SignedIn, engine: EngineDep
) -> Response:
    operator_only(engine, session.principal)
    canonical = run_id_of(run_id)
    run = await engine.runs.get(canonical) if canonical else None
    if run is None:
        raise HTTPException(404, "Not Found")
    events = await engine.audit.for_run(run.id)
    records = await engine.audit.timeline_interceptions(run.id)
    statuses = [r.status.value for r in await engine.requests.for_run(run.id)]
    waiting = await waits_for_worker(engine.adapters.db, run.graph, run.status.value, statuses)
    return render(
        request,
        "timeline.html",
        session,
        run=run,
        entries=timeline(events, records),
        unreadable=UNREADABLE_DATA,
        utc=UTC,
        waiting_for_worker=waiting,
    )


def _happened(value: str | None, stored: datetime) -> datetime:
    if value:
        parsed = time_of(value.replace("Z", "+00:00"))
        if parsed is not None:
            return parsed
    return stored


def timeline(events: list[dict[str, Any]], records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's audit events and interception records as one list, by time. The records stand
    for themselves, so the log's ``policy.*`` copies of them are left out."""
    entries: list[dict[str, Any]] = []
    for event in events:
        if event["kind"].startswith("policy."):
            continue
        entries.append(
            {
                "source": "event",
                "at": event["at"],
                "order": (0, event["id"]),
                "kind": event["kind"],
                "id": event["id"],
                "principal": event["principal"],
                "call_id": event["call_id"],
                "tool": event["tool"],
                "state_version": event["state_version"],
                "summary": summary(event["data"] or {}),
                "data_unreadable": event["data_unreadable"],
            }
        )
    for record in records:
        entries.append(
            {
                "source": "interception",
                "at": _happened(record["happened"], record["at"]),
                "order": (1, record["sequence"]),
                "kind": f"{record['point']} {record['decision']}",
                "sequence": record["sequence"],
                "decision": record["decision"],
                "reason": record["reason"],
                "interceptor": record["interceptor"],
                "mode": record["mode"],
                "resolved_by": record["resolved_by"],
                "identity": record["enforced_identity"],
            }
        )
    entries.sort(key=lambda e: (e["at"], e["order"]))
    return entries
