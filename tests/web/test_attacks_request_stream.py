"""Attacks on the live request streams (``GET /api/v1/pending/events``, the pages' ``/events``)
over real HTTP: a revoked token must not keep its stream by keeping it busy, a client cannot
pile up streams (or leave feeds behind by hanging up early), hostile query strings and
``Last-Event-ID`` headers are no 500, and an escalation away from a group is the last that group
hears of the request."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from tests.integration.test_request_events import execute
from tests.waiting import eventually, eventually_sync
from tests.web.conftest import Server, SignIn, add_user
from tests.web.test_api import client, token
from tests.web.test_request_events import listening, start
from web.app import create_app
from web.engine import Engine
from web.faces import request_stream
from web.serving import bind, server_config
from web.settings import Settings


@dataclass
class Served:
    server: Server
    app: FastAPI

    @property
    def feeds(self) -> int:
        """How many feeds the server's hub holds (read across threads: a count, nothing more)."""
        engine: Engine = self.app.state.engine
        return engine.request_streams.feeds


@pytest.fixture
def served(web_settings: Settings) -> Iterator[Served]:
    """The app as tests/web/conftest.py's ``server`` serves it, with the app itself at hand."""
    sock = bind("127.0.0.1", 0)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    settings = web_settings.model_copy(update={"public_url": url})
    app = create_app(settings, with_worker=True, migrate=False)
    uv = uvicorn.Server(server_config(app, settings))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    eventually_sync(lambda: uv.started or not thread.is_alive(), what="the web server to start")
    if not uv.started:
        raise RuntimeError("the web server did not start")
    yield Served(Server(url=url, settings=settings), app)
    uv.should_exit = True
    thread.join(timeout=15)
    sock.close()


@contextlib.asynccontextmanager
async def _busy(engine: Engine, request_id: str, every: float = 0.05) -> AsyncIterator[None]:
    """A request of support's that changes (its escalation level) every ``every`` seconds, so
    every support stream hears news all the time and is never idle."""
    stop = asyncio.Event()

    async def churn() -> None:
        while not stop.is_set():
            await execute(
                engine,
                "UPDATE approval_requests SET escalation_level = escalation_level + 1"
                " WHERE id = %s",
                request_id,
            )
            # The pace is the point: news more often than the stream's keep-alive, for as
            # long as the test needs, without flooding the database.
            await asyncio.sleep(every)

    task = asyncio.create_task(churn())
    try:
        yield
    finally:
        stop.set()
        await task


async def test_a_revoked_token_cannot_keep_its_stream_by_keeping_it_busy(
    server: Server, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(request_stream, "KEEPALIVE_SECONDS", 0.3)
    shop = await token(engine, "shop", "agents")
    ann = await token(engine, "ann", "support")
    async with client(server, shop) as shop_api, client(server, ann) as ann_api:
        _, pending = await start(shop_api, "1001")  # support's
        async with listening(ann_api) as stream, _busy(engine, pending):
            await stream.until(lambda s: len(s.requests()) >= 3)
            assert await engine.accounts.revoke_token("ann", by="test")
            # News keeps coming faster than the keep-alive: the check must happen anyway.
            await stream.until(lambda s: s.closed, seconds=10)
            assert stream.events[-1] == ("signed-out", {})


async def test_a_token_whose_groups_changed_loses_its_busy_stream(
    server: Server, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(request_stream, "KEEPALIVE_SECONDS", 0.3)
    shop = await token(engine, "shop", "agents")
    ann = await token(engine, "ann", "support")
    async with client(server, shop) as shop_api, client(server, ann) as ann_api:
        _, pending = await start(shop_api, "1001")
        async with listening(ann_api) as stream, _busy(engine, pending):
            await stream.until(lambda s: len(s.requests()) >= 3)
            # ann leaves support: she must stop hearing of support's requests.
            await engine.accounts.set_groups("ann", ["marketing"], by="test")
            await stream.until(lambda s: s.closed, seconds=10)
            assert stream.events[-1] == ("signed-out", {})


async def test_one_principal_cannot_open_streams_without_end(
    served: Served, engine: Engine
) -> None:
    server = served.server
    ann = await token(engine, "ann", "support")
    bob = await token(engine, "bob", "support")
    cap = request_stream.MAX_STREAMS_PER_PRINCIPAL
    async with contextlib.AsyncExitStack() as stack:
        ann_api = await stack.enter_async_context(
            httpx.AsyncClient(
                base_url=server.url,
                headers={"authorization": f"Bearer {ann}"},
                timeout=60,
                limits=httpx.Limits(max_connections=cap + 10),
            )
        )
        streams = [await stack.enter_async_context(listening(ann_api)) for _ in range(cap)]
        assert len(streams) == cap
        refused = await ann_api.get("/api/v1/pending/events")
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "too_many_streams"
        doc = (await ann_api.get("/api/openapi.json")).json()
        assert "429" in doc["paths"]["/api/v1/pending/events"]["get"]["responses"]
        # Someone else is not refused for ann's streams.
        async with client(server, bob) as bob_api, listening(bob_api) as other:
            assert not other.closed
    # Closing them frees their places.
    await eventually(lambda: served.feeds == 0, what="the server's feeds to close")
    async with client(server, ann) as ann_api, listening(ann_api) as again:
        assert not again.closed


async def test_clients_that_hang_up_at_once_leave_no_feed_behind(
    served: Served, engine: Engine
) -> None:
    ann = await token(engine, "ann", "support")
    parts = urlsplit(served.server.url)
    assert parts.hostname is not None
    assert parts.port is not None
    raw = (
        f"GET /api/v1/pending/events HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Authorization: Bearer {ann}\r\n\r\n"
    ).encode()
    for _ in range(60):
        _reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        writer.write(raw)
        await writer.drain()
        writer.close()  # gone before the answer's first byte
        await writer.wait_closed()
    async with client(served.server, ann) as ann_api:
        # Hangs-ups that came with or after the answer's head, too.
        for _ in range(20):
            async with ann_api.stream("GET", "/api/v1/pending/events") as response:
                assert response.status_code == 200
    await eventually(lambda: served.feeds == 0, what="the server's feeds to close")
    # ... and none of them counts against ann's streams.
    async with client(served.server, ann) as ann_api, listening(ann_api) as stream:
        assert not stream.closed


@pytest.mark.parametrize(
    "query",
    [
        "?x=%00",
        "?x=%ED%A0%80",  # a lone surrogate, UTF-8 encoded
        "?x=%FF%FE",
        "?" + "a=" + "b" * 20000,
        "?scope=%00&cursor=%00&limit=-1",
    ],
)
async def test_hostile_query_strings_are_no_500(
    server: Server, engine: Engine, sign_in: SignIn, query: str
) -> None:
    await add_user(engine, "ann", "support")
    ann = await token(engine, "ann2", "support")
    page = sign_in("ann")
    async with (
        client(server, ann) as api,
        api.stream("GET", "/api/v1/pending/events" + query) as response,
    ):
        assert response.status_code < 500, response.status_code
        assert response.status_code in (200, 414, 422, 431), response.status_code
    async with (
        httpx.AsyncClient(base_url=server.url, cookies=page.cookies, timeout=60) as browser,
        browser.stream("GET", "/events" + query) as response,
    ):
        assert response.status_code < 500, response.status_code


@pytest.mark.parametrize(
    "last_event_id", ["9" * 5000, "-1", "\u00ff" * 100, "'; DROP TABLE runs; --"]
)
async def test_a_garbage_last_event_id_is_ignored(
    server: Server, engine: Engine, last_event_id: str
) -> None:
    ann = await token(engine, "ann", "support")
    shop = await token(engine, "shop", "agents")
    headers = {b"last-event-id": last_event_id.encode("latin-1")}
    async with (
        client(server, ann) as api,
        client(server, shop) as shop_api,
        api.stream("GET", "/api/v1/pending/events", headers=headers) as response,
    ):
        assert response.status_code == 200
        _, pending = await start(shop_api, "1001")
        async for line in response.aiter_lines():
            if pending in line:
                break


async def test_a_last_event_id_with_a_control_character_is_a_400_and_the_stream_still_works(
    server: Server, engine: Engine
) -> None:
    """DEL is not a field character (RFC 9110): uvicorn's HTTP parser (httptools) refuses the
    request before the app sees it; the next request is served as ever."""
    ann = await token(engine, "ann", "support")
    async with client(server, ann) as api:
        refused = await api.get("/api/v1/pending/events", headers={b"last-event-id": b"abc\x7f"})
        assert refused.status_code == 400
        async with api.stream("GET", "/api/v1/pending/events") as response:
            assert response.status_code == 200


async def test_an_escalation_away_from_a_group_is_the_last_it_hears(
    server: Server, engine: Engine
) -> None:
    shop = await token(engine, "shop", "agents")
    ann = await token(engine, "ann", "support")
    fin = await token(engine, "fin", "finance")
    async with (
        client(server, shop) as shop_api,
        client(server, ann) as ann_api,
        client(server, fin) as fin_api,
        listening(ann_api) as ann_s,
        listening(fin_api) as fin_s,
    ):
        _, moved = await start(shop_api, "1001")  # support's
        await execute(
            engine, "UPDATE approval_requests SET approvers = '{finance}' WHERE id = %s", moved
        )
        decided = await fin_api.post(
            f"/api/v1/pending/{moved}/decision", json={"decision": "reject", "reason": "no"}
        )
        assert decided.status_code == 200, decided.text
        _, marker = await start(shop_api, "1001")  # news ann hears after all of that
        await ann_s.until(lambda s: (marker, "opened") in s.requests())
        await fin_s.until(lambda s: (moved, "decided") in s.requests())
        assert ann_s.requests() == [(moved, "opened"), (moved, "escalated"), (marker, "opened")]
        assert fin_s.requests() == [(moved, "escalated"), (moved, "decided")]
        # And ann cannot read it any more either.
        assert (await ann_api.get(f"/api/v1/pending/{moved}")).status_code == 404
