"""A real HTTP server for web tests: the app under uvicorn on a loopback port, with its own
engine on this test's database (and a resume worker), plus signed-in clients."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn

from graphs.orchestration.runner import Runner
from tests.integration.helpers import person_token, run_status, until
from tests.waiting import eventually_sync
from web.app import create_app
from web.engine import Engine
from web.serving import bind, server_config
from web.settings import Settings

PASSWORD = "correct horse battery staple"


@dataclass
class Server:
    url: str
    settings: Settings


@pytest.fixture
def web_settings(database_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=database_url,
        data_dir=tmp_path,
        config_file=tmp_path / "none.toml",
        secret_key="test-secret-key-" + "x" * 32,
        login_attempts=3,
        # The stricter rule, so the form's and the API's refusal stay covered.
        require_reject_reason=True,
    )


@pytest.fixture
def server(web_settings: Settings) -> Iterator[Server]:
    """The app with a worker, served by uvicorn on 127.0.0.1 (a port of its own)."""
    with serving(web_settings) as running:
        yield running


@contextmanager
def serving(web_settings: Settings) -> Iterator[Server]:
    """An app with a worker, served by uvicorn on 127.0.0.1 (a port of its own), for the
    block: one web process (a test may run several on one database)."""
    # The listening socket approvals serve makes (bind), so the tests see its TCP behaviour.
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    settings = web_settings.model_copy(update={"public_url": url})
    app = create_app(settings, with_worker=True, migrate=False)
    # The same uvicorn configuration as `approvals serve` (which proxies are believed).
    config = server_config(app, settings)
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    eventually_sync(lambda: uv.started or not thread.is_alive(), what="the web server to start")
    if not uv.started:
        raise RuntimeError("the web server did not start")
    try:
        yield Server(url=url, settings=settings)
    finally:
        uv.should_exit = True
        thread.join(timeout=15)
        sock.close()


async def add_user(engine: Engine, name: str, *groups: str) -> None:
    await engine.accounts.add_user(name, PASSWORD, list(groups))


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match, "no CSRF token on the page"
    return match.group(1)


def login(client: httpx.Client, name: str, password: str = PASSWORD, **form: str) -> httpx.Response:
    """Post the sign-in form as a browser does: fetch it first (its CSRF token and cookie)."""
    token = login_csrf_of(client.get("/login").text)
    data = {"username": name, "password": password, "next": "/", "csrf": token, **form}
    return client.post("/login", data=data)


def login_csrf_of(html: str) -> str:
    match = re.search(
        r'<form method="post" action="/login">.*?name="csrf" value="([^"]+)"', html, re.S
    )
    assert match, "no sign-in CSRF token on the page"
    return match.group(1)


SignIn = Callable[[str], httpx.Client]


@pytest.fixture
def sign_in(server: Server) -> Iterator[SignIn]:
    """``sign_in(name)``: an HTTP client with a session for ``name`` (password PASSWORD),
    closed after the test."""
    clients: list[httpx.Client] = []

    def make(name: str) -> httpx.Client:
        client = httpx.Client(base_url=server.url, headers={"origin": server.url}, timeout=30)
        clients.append(client)
        page = login(client, name)
        assert page.status_code == 303, page.text
        return client

    yield make
    for client in clients:
        client.close()


async def failed_refund(server: Server, engine: Engine, shop: str | None = None) -> tuple[str, str]:
    """A refund started over the API with token ``shop`` (a person's token, made here when not
    given), whose approved call's resume then failed in the served app's worker (a thread of
    this process): the run waits beside a failed job. The run id and the starter's token."""
    shop = shop or await person_token(engine, "shop", "agents")
    async with httpx.AsyncClient(
        base_url=server.url, headers={"authorization": f"Bearer {shop}"}, timeout=60
    ) as api:
        started = await api.post(
            "/api/v1/runs", json={"graph": "refund", "input": {"message": "refund 1001"}}
        )
    assert started.status_code == 200, started.text
    run_id, request_id = started.json()["run_id"], started.json()["pending"][0]
    original = Runner.resume

    async def broken(self: Runner, claimed: object) -> None:
        raise KeyError("a graph's own bug")

    Runner.resume = broken  # type: ignore[method-assign]
    try:
        await engine.decide_as_operator(request_id, "approve", principal="bob")
        await until(engine, "select status = 'failed' from resume_queue")
    finally:
        Runner.resume = original  # type: ignore[method-assign]
    assert await run_status(engine, run_id) == "waiting"
    return run_id, shop
