"""A run's events as server-sent events (``GET /api/v1/runs/{id}/events``).

The step a client wants to follow usually runs in another process (the starter's, or a
worker's), so the stream reads ``run_events`` and waits on PostgreSQL's NOTIFY between reads:
events are sent in the order they were recorded, each with its id, so a client reconnecting
with ``Last-Event-ID`` gets only what it missed. Without one, the stream starts from the run's
first event (its history is one event per node update, and small). It closes once the run's
latest event says it waits for a human or ended, or that a resume failed and left it waiting; a
run that already waits or ended gets its status and the stream closes at once. Each web process
LISTENs on one connection of its own (``storage.run_events.RunEventHub``), whatever the number of
streams.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from approvals.model import Run, RunStatus
from web.engine import PgRunEvents, Subscription

#: The statuses that end a stream: the run waits for a human, or it is over.
STOPS = frozenset(
    {
        RunStatus.WAITING.value,
        RunStatus.COMPLETED.value,
        RunStatus.BLOCKED.value,
        RunStatus.FAILED.value,
        RunStatus.CANCELLED.value,
    }
)
#: The statuses a run never leaves (a cancelled run's step may still publish updates, but its
#: settlement is dropped: nothing after this status matters).
FINAL = STOPS - {RunStatus.WAITING.value}
#: A comment this often keeps proxies from closing an idle stream; each also re-reads the run's
#: events (in case a notification was missed).
KEEPALIVE_SECONDS = 15.0
#: Events read at a time.
PAGE = 500


def event_json(row: dict[str, Any], run_id: str, *, content: bool = True) -> dict[str, Any]:
    """One event as the stream (and ``runs start --stream``) shows it; without ``content``,
    its messages keep only the names of the tools they call."""
    out: dict[str, Any] = {"run_id": run_id, "kind": row["kind"]}
    if row.get("node") is not None:
        out["node"] = row["node"]
    out.update(row.get("data") or {})
    if not content and isinstance(out.get("messages"), list):
        out["messages"] = [
            {"tool_calls": m.get("tool_calls", [])} for m in out["messages"] if isinstance(m, dict)
        ]
    return out


def sse(payload: dict[str, Any], *, kind: str, event_id: int | None = None) -> bytes:
    lines = [] if event_id is None else [f"id: {event_id}"]
    lines += [f"event: {kind}", f"data: {json.dumps(payload, separators=(',', ':'))}"]
    return ("\n".join(lines) + "\n\n").encode()


def parse_after(value: str | None) -> int | None:
    """A ``Last-Event-ID`` (or ``?after=``): a non-negative event id, or ``None`` if malformed."""
    if value is None or value == "":
        return 0
    if not value.isdigit() or len(value) > 18:
        return None
    return int(value)


def _final(row: dict[str, Any]) -> bool:
    return row["kind"] == "status" and (row.get("data") or {}).get("status") in FINAL


def _stops(row: dict[str, Any]) -> bool:
    # A failed resume left the run waiting (resume_failed): no step follows until someone acts.
    if row["kind"] == "resume_failed":
        return True
    return row["kind"] == "status" and (row.get("data") or {}).get("status") in STOPS


async def run_events(
    events: PgRunEvents,
    sub: Subscription,
    run: Run,
    after: int,
    status: Callable[[], Awaitable[str | None]],
    *,
    content: bool = True,
) -> AsyncIterator[bytes]:
    """The stream's bytes; closes ``sub`` when done (or when the client goes away). ``sub``
    was taken before the first read, so nothing published after that read is missed.
    ``status`` reads the run's current status; ``content``: whether messages keep their text
    (the run's starter and operators), or only the names of the tools they call (approvers,
    who see the run through its requests: the model's text may quote an argument a policy
    redacts from them)."""
    run_id = run.id
    ended = False
    try:
        rows = await events.after(run_id, after, PAGE)
        if not rows and run.status.value in STOPS:
            # Nothing new, and the run waits or ended: say so, and close.
            yield sse(
                {"run_id": run_id, "kind": "status", "status": run.status.value}, kind="status"
            )
            return
        while True:
            for row in rows:
                yield sse(
                    event_json(row, run_id, content=content), kind=row["kind"], event_id=row["id"]
                )
                after = row["id"]
                ended = ended or _final(row)
            if len(rows) >= PAGE:
                rows = await events.after(run_id, after, PAGE)
                continue
            if ended:
                return
            if rows and _stops(rows[-1]):
                more = await events.after(run_id, after, PAGE)
                if not more:
                    return
                rows = more
                continue
            if not await sub.wait(KEEPALIVE_SECONDS):
                yield b": keepalive\n\n"
                rows = await events.after(run_id, after, PAGE)
                now = None if rows else await status()
                if now in FINAL:
                    # Its status event was not seen (recorded out of order with another of
                    # the run's events): the run's row says it is over.
                    yield sse({"run_id": run_id, "kind": "status", "status": now}, kind="status")
                    return
                continue
            rows = await events.after(run_id, after, PAGE)
    finally:
        sub.close()
