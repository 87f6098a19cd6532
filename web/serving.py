"""Serving the web app from the CLI: ``approvals serve`` and the demo's server."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import secrets
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from approvals.errors import AccountExists, ConfigurationError
from web.app import create_app
from web.engine import Engine, freeze_heap
from web.settings import Settings

DEMO_APPROVER = "demo-approver"
DEMO_GROUP = "support"
log = logging.getLogger("approvals.web")


def bind(host: str, port: int, *, fallback: bool = False) -> socket.socket:
    """A listening socket on ``host:port`` (``port`` 0: any free port). With ``fallback``, a
    taken port falls back to a free one instead of failing."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on
    # sockets whose proto says TCP, and with it on, each response waited about 40 ms for the
    # client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        if fallback and exc.errno == errno.EADDRINUSE:
            sock.bind((host, 0))
        else:
            sock.close()
            raise ConfigurationError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def server_config(app: ASGIApp, settings: Settings, **options: Any) -> uvicorn.Config:
    """uvicorn's configuration for the app, believing ``X-Forwarded-*`` headers only from
    ``settings.trusted_proxies``.

    uvicorn believes them from 127.0.0.1 by default (and from whatever ``FORWARDED_ALLOW_IPS``
    says): anyone who reaches the app from the same machine could then claim any client address
    and slip past the sign-in throttle. Here nothing is believed unless configured."""
    trusted = list(settings.trusted_proxies)
    return uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=5,
        proxy_headers=bool(trusted),
        forwarded_allow_ips=trusted,
        **options,
    )


@asynccontextmanager
async def serving(
    settings: Settings,
    sock: socket.socket,
    *,
    engine: Engine | None = None,
    database_url: str | None = None,
    with_worker: bool = False,
    freeze: bool = False,
) -> AsyncIterator[uvicorn.Server]:
    """The app served on ``sock`` for the life of the block; ``freeze``: a long-running
    process, whose heap is frozen once the app is up (``freeze_heap``)."""
    app = create_app(
        settings, engine=engine, database_url=database_url, with_worker=with_worker, migrate=False
    )
    # log_config=None: uvicorn's records go through the process's handlers (web.logs), in
    # the same format as everything else.
    config = server_config(app, settings, log_config=None)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            await task  # raises what stopped it
            raise ConfigurationError("the web server stopped while starting")
        await asyncio.sleep(0.05)
    if freeze:
        freeze_heap(app.state.engine)
    try:
        yield server
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def serve_forever(server: uvicorn.Server, stop: asyncio.Event) -> None:
    await stop.wait()
    server.should_exit = True


async def demo_login(engine: Engine, data_dir: Path) -> tuple[str, str]:
    """The demo approver's login: created once with a random password, kept (0600) in the data
    directory so the next demo can print it again. Never a well-known password."""
    path = data_dir / "demo-login"
    password = await asyncio.to_thread(_read, path)
    if password and await engine.accounts.authenticate(DEMO_APPROVER, password) is not None:
        return DEMO_APPROVER, password
    password = secrets.token_urlsafe(12)
    try:
        await engine.accounts.add_user(DEMO_APPROVER, password, [DEMO_GROUP])
    except AccountExists:
        raise ConfigurationError(
            f"a user {DEMO_APPROVER!r} exists but its password is not the one in {path}; "
            "sign in with the web app as another approver"
        ) from None
    await asyncio.to_thread(_keep, path, password)
    return DEMO_APPROVER, password


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8").strip() if path.is_file() else None


def _keep(path: Path, secret: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(secret, encoding="utf-8")
