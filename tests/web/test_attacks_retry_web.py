"""Hostile bodies, ids and callers on ``POST /api/v1/runs/{id}/retry``: none is a 500, none
writes anything, and the one good retry is followed on the run's event stream."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx

from graphs.orchestration.runner import Runner
from tests.integration.helpers import person_token, scalar
from tests.web.conftest import Server, failed_refund
from web.engine import Engine


def client(server: Server, secret: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=server.url, headers={"authorization": f"Bearer {secret}"}, timeout=60
    )


async def nothing_written(engine: Engine) -> None:
    assert await scalar(engine, "select status from resume_queue") == "failed"
    assert (
        await scalar(engine, "select count(*) from audit_events where kind = 'resume.retried'") == 0
    )


async def test_hostile_retry_bodies_and_ids_are_refused_with_nothing_written(
    server: Server, engine: Engine
) -> None:
    run_id, _ = await failed_refund(server, engine)
    ops = await person_token(engine, "olga", "operators")
    path = f"/api/v1/runs/{run_id}/retry"
    json_type = {"content-type": "application/json"}
    bodies: list[tuple[str, dict[str, str], set[int]]] = [
        ('{"reason": NaN}', json_type, {422}),
        ('{"reason": Infinity}', json_type, {422}),
        ('{"reason": 1e999}', json_type, {422}),
        ('{"reason": "\\ud800"}', json_type, {422}),
        ('{"reason": "a\\u0000b"}', json_type, {422}),
        (json.dumps({"reason": "x" * 100_000}), json_type, {413, 422}),
        ('{"reason": ["fixed"]}', json_type, {422}),
        ('{"reason": {"$gt": ""}}', json_type, {422}),
        ('{"reason": 5}', json_type, {422}),
        ("[]", json_type, {422}),
        ('"fixed"', json_type, {422}),
        ("{", json_type, {422}),
        ('{"reason": "a", "reason": "b", "x": 1}', json_type, {422}),
        (b"\xff\xfe".decode("latin-1"), json_type, {422}),
        ('{"reason": "fixed"}', {"content-type": "text/plain"}, {415, 422}),
        ('{"reason": "fixed"}', {"content-type": "application/x-www-form-urlencoded"}, {415, 422}),
        ("reason=fixed", {"content-type": "application/x-www-form-urlencoded"}, {415, 422}),
    ]
    async with client(server, ops) as api:
        for body, headers, allowed in bodies:
            got = await api.post(path, content=body.encode("latin-1", "replace"), headers=headers)
            assert got.status_code in allowed, (body[:40], headers, got.status_code, got.text)
            assert got.json()["error"]["code"], got.text
        for forged in (
            run_id.upper(),
            run_id.replace("-", ""),
            "{" + run_id + "}",
            run_id + "%00",
            run_id[:-1] + "%EF%BC%91",  # a fullwidth digit
            "".join(chr(ord(c) - ord("0") + 0x660) if c.isdigit() else c for c in run_id),
            "%00",
            "x" * 5000,
            run_id + "%2F..",
        ):
            got = await api.post(f"/api/v1/runs/{forged}/retry", json={"reason": "fixed"})
            assert got.status_code == 404, (forged, got.status_code, got.text)
    await nothing_written(engine)


async def test_a_retry_is_followed_on_the_runs_event_stream(server: Server, engine: Engine) -> None:
    """After an operator's retry, the starter reconnecting with the last event it had follows
    the retried step to its end (not told 'waiting' and closed)."""
    run_id, shop = await failed_refund(server, engine)
    # What the starter's stream had sent (a stream opened now would wait: the decision's
    # 'resuming' is its last event, and its failed step settles nothing).
    last = await scalar(engine, "select max(id) from run_events where run_id = %s", run_id)
    ops = await person_token(engine, "olga", "operators")
    # The served app's worker (a thread of its own) waits before the retried step, so that the
    # stream connects first.
    go = threading.Event()
    original = Runner.resume

    async def held(self: Runner, claimed: Any) -> Any:
        await asyncio.to_thread(go.wait, 30)
        return await original(self, claimed)

    Runner.resume = held  # type: ignore[method-assign]
    try:
        async with client(server, ops) as api:
            retried = await api.post(f"/api/v1/runs/{run_id}/retry", json={"reason": "fixed"})
        assert retried.status_code == 200, retried.text

        async with (
            client(server, shop) as api,
            api.stream(
                "GET", f"/api/v1/runs/{run_id}/events", headers={"last-event-id": str(last)}
            ) as stream,
        ):
            # The response has begun: the stream subscribed to the run's events before it.
            assert stream.status_code == 200
            go.set()
            text = (await asyncio.wait_for(stream.aread(), 30)).decode()
    finally:
        go.set()
        Runner.resume = original  # type: ignore[method-assign]
    assert "event: resuming" in text, text
    assert '"status":"completed"' in text, text


async def test_a_stream_following_a_resume_that_fails_closes(
    server: Server, engine: Engine
) -> None:
    """The starter follows the decision's resume (from its 'resuming' event); the resume fails
    and leaves the run waiting: the stream says so and closes, rather than keeping alive for
    a step that will not come."""
    run_id, shop = await failed_refund(server, engine)
    resuming = await scalar(
        engine,
        "select max(id) from run_events where run_id = %s and kind = 'resuming'",
        run_id,
    )
    async with client(server, shop) as api:
        got = await asyncio.wait_for(
            api.get(f"/api/v1/runs/{run_id}/events", headers={"last-event-id": str(resuming - 1)}),
            20,
        )
    assert got.status_code == 200, got.text
    kinds = [
        line.removeprefix("event: ") for line in got.text.splitlines() if line.startswith("event:")
    ]
    assert kinds == ["resuming", "resume_failed"], got.text
    assert '"status":"waiting"' in got.text
