"""A run's events over real HTTP (server-sent events): in order, live across processes' steps
(published through PostgreSQL), resumable by Last-Event-ID, and only for who may see the run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.integration.helpers import scalar, thread_lock
from tests.web.conftest import Server
from tests.web.test_api import client, token
from web.engine import Engine
from web.faces import run_stream


async def sse_events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """Each event of a text/event-stream response: its data, with its id (if any) and kind."""
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line == "":
            if "data" in fields:
                event = json.loads(fields["data"])
                event["_id"] = int(fields["id"]) if "id" in fields else None
                event["_event"] = fields.get("event")
                yield event
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            fields[name] = value


async def all_events(api: httpx.AsyncClient, run_id: str, after: int | None = None) -> list[Any]:
    headers = {} if after is None else {"last-event-id": str(after)}
    async with api.stream("GET", f"/api/v1/runs/{run_id}/events", headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        return [e async for e in sse_events(response)]


async def started_refund(server: Server, engine: Engine) -> tuple[str, str, str]:
    """A refund run started through the API by token ``shop``: its id, its pending request and
    the token."""
    shop = await token(engine, "shop", "agents")
    async with client(server, shop) as api:
        started = await api.post(
            "/api/v1/runs", json={"graph": "refund", "input": {"message": "refund 1001"}}
        )
    assert started.status_code == 200, started.text
    assert started.json()["status"] == "waiting"
    return started.json()["run_id"], started.json()["pending"][0], shop


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["status"] if e["kind"] == "status" else e["kind"] for e in events]


async def test_a_client_sees_a_runs_events_in_order_as_it_pauses_is_decided_and_finishes(
    server: Server, engine: Engine
) -> None:
    run_id, request_id, shop = await started_refund(server, engine)
    support = await token(engine, "lead", "support")
    run = await engine.runs.get(run_id)
    assert run is not None
    async with client(server, shop) as api, client(server, support) as lead:
        # Connected after the run paused: its history from the start, then the stream closes.
        first = await all_events(api, run_id)
        assert kinds(first)[0] == "running", first
        assert kinds(first)[-1] == "waiting", first
        updates = [e for e in first if e["kind"] == "update"]
        assert updates
        assert all(e["node"] for e in updates)
        called = [c for e in updates for m in e["messages"] for c in m["tool_calls"]]
        assert called[-1] == "issue_refund"
        # Only the tool's name: never its arguments.
        assert "1001" not in json.dumps(updates)
        ids = [e["_id"] for e in first]
        assert ids == sorted(ids)
        assert len(set(ids)) == len(ids)

        # The worker is kept off the thread until the stream is connected: what follows is
        # sent live, as the worker's step publishes it.
        async with thread_lock(engine, run.thread_id):
            decided = await lead.post(
                f"/api/v1/pending/{request_id}/decision", json={"decision": "approve"}
            )
            assert decided.status_code == 200, decided.text
            stream = api.stream(
                "GET", f"/api/v1/runs/{run_id}/events", headers={"last-event-id": str(ids[-1])}
            )
            response = await stream.__aenter__()
            events = sse_events(response)
            resuming = await anext(events)
            assert resuming["kind"] == "resuming"
            assert resuming["_id"] > ids[-1]
        try:
            rest = [e async for e in events]
        finally:
            await stream.__aexit__(None, None, None)
        assert kinds(rest)[-1] == "completed", rest
        assert "update" in kinds(rest)
        answer = [m["content"] for e in rest if e["kind"] == "update" for m in e["messages"]]
        report = (await api.get(f"/api/v1/runs/{run_id}")).json()
        assert report["status"] == "completed"
        assert answer[-1] == report["answer"]

        # A client arriving after the end, having seen it all, gets the status and is done.
        late = await all_events(lead, run_id, after=rest[-1]["_id"])
        assert [(e["kind"], e["status"], e["_id"]) for e in late] == [("status", "completed", None)]

        # The approver (who sees the run through its request) is sent the same events, but of
        # the messages only the tools they call: the text is the starter's.
        seen_by_lead = await all_events(lead, run_id)
        assert [e["_id"] for e in seen_by_lead] == [e["_id"] for e in [*first, resuming, *rest]]
        lead_messages = [m for e in seen_by_lead if e["kind"] == "update" for m in e["messages"]]
        assert lead_messages
        assert all(set(m) == {"tool_calls"} for m in lead_messages)
        assert report["answer"] not in json.dumps(seen_by_lead)


async def test_a_principal_who_may_not_see_the_run_gets_404_and_bad_ids_are_refused(
    server: Server, engine: Engine
) -> None:
    run_id, _, starter = await started_refund(server, engine)
    finance = await token(engine, "fin", "finance")  # the refund's request goes to support
    shop = await token(engine, "shop2", "agents")
    async with client(server, finance) as api:
        hidden = await api.get(f"/api/v1/runs/{run_id}/events")
        unknown = await api.get("/api/v1/runs/00000000-0000-0000-0000-000000000000/events")
        malformed = await api.get("/api/v1/runs/nope/events")
    async with client(server, None) as api:
        anonymous = await api.get(f"/api/v1/runs/{run_id}/events")
    async with client(server, shop) as api:
        # The run is shop's (started_refund), not shop2's.
        other = await api.get(f"/api/v1/runs/{run_id}/events")
    for response in (hidden, unknown, malformed, other):
        assert response.status_code == 404, response.text
        assert response.json()["error"]["code"] == "not_found"
        assert "event-stream" not in response.headers["content-type"]
    assert anonymous.status_code == 401
    async with client(server, starter) as api:
        bad = await api.get(f"/api/v1/runs/{run_id}/events", headers={"last-event-id": "x1"})
    assert bad.status_code == 422


async def test_a_stream_of_an_ended_run_always_closes(
    server: Server, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id, request_id, shop = await started_refund(server, engine)
    support = await token(engine, "lead", "support")
    async with client(server, support) as lead:
        decided = await lead.post(
            f"/api/v1/pending/{request_id}/decision", json={"decision": "approve"}
        )
        assert decided.status_code == 200
    async with client(server, shop) as api:
        # Waits for the end (the stream closes at "completed").
        done = await all_events(api, run_id, after=0)
        while kinds(done)[-1] != "completed":
            done = await all_events(api, run_id, after=0)
        # Whatever is recorded after a final status, the stream sends it and closes.
        await engine.run_events.publish(run_id, "late", {"messages": []})
        after_end = await asyncio.wait_for(all_events(api, run_id, after=done[-2]["_id"]), 10)
        assert [e["kind"] for e in after_end] == ["status", "update"]
        # A final status event the stream never sees (recorded out of order): the run's row
        # ends the stream at the next keepalive.
        monkeypatch.setattr(run_stream, "KEEPALIVE_SECONDS", 0.2)
        await scalar(engine, "DELETE FROM run_events WHERE id = %s RETURNING id", done[-1]["_id"])
        missed = await asyncio.wait_for(all_events(api, run_id, after=done[-2]["_id"]), 10)
    assert [(e["kind"], e.get("status"), e["_id"]) for e in missed] == [
        ("update", None, after_end[-1]["_id"]),
        ("status", "completed", None),
    ]
