"""Request changes pushed over real HTTP (server-sent events, ``GET /api/v1/pending/events`` and
the pages' ``/events``): each stream carries only what its principal may see, survives a lost
LISTEN connection, and ends with its session or token."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from tests.integration.helpers import scalar, until
from tests.integration.test_request_events import execute
from tests.waiting import eventually
from tests.web.conftest import Server, SignIn, add_user
from tests.web.test_api import client, token
from web.engine import Engine
from web.faces import request_stream


class Listener:
    """One open stream, read in the background: its events, in order, as (event, data)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.events: list[tuple[str, dict[str, Any]]] = []
        #: Keep-alive comments so far: each is sent after the stream found its principal
        #: still signed in.
        self.keepalives = 0
        self.closed = False
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        event, data = "message", ""
        try:
            async for line in self.response.aiter_lines():
                if line.startswith("event:"):
                    event = line.removeprefix("event:").strip()
                elif line.startswith("data:"):
                    data = line.removeprefix("data:").strip()
                elif line.startswith(":"):
                    self.keepalives += 1
                elif line == "" and data:
                    self.events.append((event, json.loads(data)))
                    event, data = "message", ""
        finally:
            self.closed = True

    def requests(self) -> list[tuple[str, str]]:
        """(request id, kind) of each ``request`` event so far."""
        return [(d["id"], d["kind"]) for e, d in self.events if e == "request"]

    async def until(self, done: Callable[[Listener], bool], seconds: float = 30) -> None:
        try:
            await eventually(lambda: done(self), timeout=seconds, what="the stream's news")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; got {self.events}") from None

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


@contextlib.asynccontextmanager
async def listening(
    api: httpx.AsyncClient, path: str = "/api/v1/pending/events"
) -> AsyncIterator[Listener]:
    async with api.stream("GET", path) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-store"
        # The status came after the stream's feed was taken: what changes from here is news.
        listener = Listener(response)
        try:
            yield listener
        finally:
            await listener.stop()


async def start(api: httpx.AsyncClient, order: str) -> tuple[str, str]:
    """A refund run started through the API: its id and its pending request."""
    out = await api.post(
        "/api/v1/runs", json={"graph": "refund", "input": {"message": f"refund {order}"}}
    )
    assert out.status_code == 200, out.text
    assert out.json()["status"] == "waiting", out.json()
    return out.json()["run_id"], out.json()["pending"][0]


async def test_each_stream_carries_only_the_requests_its_principal_may_see(
    server: Server, engine: Engine
) -> None:
    shop = await token(engine, "shop", "agents")  # starts the runs
    ann = await token(engine, "ann", "support")
    fin = await token(engine, "fin", "finance")
    ops = await token(engine, "olga", "operators")
    eve = await token(engine, "eve", "marketing")  # of no group a request names (until the last)
    async with (
        client(server, shop) as shop_api,
        client(server, ann) as ann_api,
        client(server, fin) as fin_api,
        client(server, ops) as ops_api,
        client(server, eve) as eve_api,
        listening(shop_api) as shop_s,
        listening(ann_api) as ann_s,
        listening(fin_api) as fin_s,
        listening(ops_api) as ops_s,
        listening(eve_api) as eve_s,
    ):
        _, small = await start(shop_api, "1001")  # 25.00: support's
        decided = await ann_api.post(
            f"/api/v1/pending/{small}/decision", json={"decision": "approve"}
        )
        assert decided.status_code == 200, decided.text
        _, big = await start(shop_api, "1002")  # 120.00: finance's
        rejected = await fin_api.post(
            f"/api/v1/pending/{big}/decision", json={"decision": "reject", "reason": "no"}
        )
        assert rejected.status_code == 200, rejected.text
        _, small2 = await start(shop_api, "1001")
        _, big2 = await start(shop_api, "1002")
        _, own = await start(eve_api, "1001")  # eve started it: her own run's request
        # Last, news every stream hears: small2 escalated to every group. Changes are told in
        # commit order, so whatever a stream was told of the requests before it (a leak
        # included) it has been told by the time it hears this.
        await execute(
            engine,
            "UPDATE approval_requests SET approvers = %s WHERE id = %s",
            ["support", "finance", "agents", "marketing"],
            small2,
        )
        last = (small2, "escalated")
        for stream in (shop_s, ann_s, fin_s, ops_s, eve_s):
            await stream.until(lambda s: last in s.requests())

        everything = [
            (small, "opened"),
            (small, "decided"),
            (big, "opened"),
            (big, "decided"),
            (small2, "opened"),
            (big2, "opened"),
        ]
        assert ann_s.requests() == [
            (small, "opened"),
            (small, "decided"),
            (small2, "opened"),
            (own, "opened"),
            last,
        ]
        assert fin_s.requests() == [(big, "opened"), (big, "decided"), (big2, "opened"), last]
        assert ops_s.requests() == [*everything, (own, "opened"), last]
        # The starter of the runs hears of its runs' requests, whoever decides them.
        assert shop_s.requests() == [*everything, last]
        assert eve_s.requests() == [(own, "opened"), last]

    told = next(d for e, d in ann_s.events if e == "request")
    assert told == {
        "id": small,
        "run_id": told["run_id"],
        "tool": "issue_refund",
        "kind": "opened",
        "status": "pending",
    }
    # Never what the request shows: no arguments, no reason.
    assert "1001" not in json.dumps(ann_s.events)
    decided_event = [d for e, d in ann_s.events if e == "request" and d["kind"] == "decided"]
    assert decided_event[0]["status"] == "approved"


async def test_a_stream_outlives_its_servers_lost_listen_connection(
    server: Server, engine: Engine
) -> None:
    shop = await token(engine, "shop", "agents")
    ann = await token(engine, "ann", "support")
    async with (
        client(server, shop) as shop_api,
        client(server, ann) as ann_api,
        listening(ann_api) as stream,
    ):
        _, first = await start(shop_api, "1001")
        await stream.until(lambda s: (first, "opened") in s.requests())

        # The web process's one listening connection dies (a failover, a restarted pooler):
        # the stream is told it may have missed changes, and the process listens again.
        killed = await scalar(
            engine,
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE query LIKE 'LISTEN approvals_sessions_ended%%'"
            " AND datname = current_database()",
        )
        assert killed == 1
        await stream.until(lambda s: any(e == "resync" for e, _ in s.events))
        await until(
            engine,
            "SELECT count(*) > 0 FROM pg_stat_activity WHERE datname = current_database()"
            " AND query LIKE 'LISTEN approvals_sessions_ended%%'",
        )

        _, second = await start(shop_api, "1001")
        await stream.until(lambda s: (second, "opened") in s.requests())
        assert not stream.closed


async def test_the_pages_stream_ends_at_once_with_its_session(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "ann", "support")
    ann = sign_in("ann")
    async with (
        httpx.AsyncClient(base_url=server.url, cookies=ann.cookies, timeout=60) as browser,
        listening(browser, "/events") as stream,
    ):
        shop = await token(engine, "shop", "agents")
        async with client(server, shop) as shop_api:
            _, first = await start(shop_api, "1001")
        await stream.until(lambda s: (first, "opened") in s.requests())
        # An operator ends ann's sessions: the stream says so at once, well before its next
        # keep-alive (15 s) would have asked, and closes.
        began = time.monotonic()
        assert await engine.sessions.end_principal("local:ann", by="test") == 1
        await stream.until(lambda s: s.closed, seconds=10)
        assert stream.events[-1] == ("signed-out", {})
        assert time.monotonic() - began < request_stream.KEEPALIVE_SECONDS


async def test_a_revoked_tokens_stream_ends(
    server: Server, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(request_stream, "KEEPALIVE_SECONDS", 0.2)
    ann = await token(engine, "ann", "support")
    async with client(server, ann) as ann_api, listening(ann_api) as stream:
        # Each keep-alive comes after a check that found the token still good.
        await stream.until(lambda s: s.keepalives >= 2)
        assert not stream.closed
        assert await engine.accounts.revoke_token("ann", by="test")
        await stream.until(lambda s: s.closed, seconds=10)
        assert stream.events == [("signed-out", {})]


async def test_the_stream_wants_a_valid_token(server: Server, engine: Engine) -> None:
    async with client(server, None) as anonymous, client(server, "nope") as forged:
        assert (await anonymous.get("/api/v1/pending/events")).status_code == 401
        assert (await forged.get("/api/v1/pending/events")).status_code == 401
