"""The approvers' web app: ``create_app(settings)`` builds it; nothing lives at module level.

The app owns an engine for its lifetime (or uses one it is given, in tests), the session and
CSRF machinery, and its faces (``web.faces``): the JSON API under ``/api/v1``, the HTML pages,
monitoring and the API docs. A face is one module with a module-level ``router``, and its line
in ``web.faces.FACES``. ``with_worker`` also runs a resume worker in the same process,
so a decision made in the browser resumes its run without a separate ``approvals worker``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from importlib import import_module
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from web.deps import gate_size
from web.engine import Engine, open_engine, upgrade
from web.engine.warm_up import warm_up
from web.exception_handlers import HANDLERS
from web.faces import FACES
from web.faces.pages import sign_in
from web.faces.pages.templating import compile_templates
from web.instrumentation import instrument
from web.security import BodyLimit, LoginThrottle, SecurityHeaders, Sessions, secret_key
from web.settings import Settings, revealed

HERE = Path(__file__).resolve().parent


def create_app(
    settings: Settings,
    *,
    engine: Engine | None = None,
    database_url: str | None = None,
    with_worker: bool = False,
    migrate: bool = True,
) -> FastAPI:
    """The app. ``engine``: use this one (tests); otherwise open one on ``database_url`` (or
    ``settings.database_url``) at startup, after applying migrations."""
    app = FastAPI(
        title="approvals",
        version="0.1.0",
        summary="Human approval of AI agents' sensitive tool calls",
        lifespan=_lifespan(settings, engine, database_url, with_worker, migrate),
        # Our own /api/docs (web.faces.api_docs): FastAPI's loads a CDN with an inline script.
        docs_url=None,
        redoc_url=None,
        openapi_url="/api/openapi.json",
    )
    app.state.settings = settings
    app.state.api_gate = asyncio.Semaphore(gate_size(settings))
    app.state.sessions = Sessions(
        secret_key(revealed(settings.secret_key), settings.data_dir),
        ttl_seconds=settings.session_ttl_seconds,
        secure=settings.public_url.startswith("https://"),
        cache_seconds=settings.session_cache_seconds,
    )
    app.state.throttle = LoginThrottle(
        settings.login_attempts,
        settings.login_window_seconds,
        account_attempts=settings.login_account_attempts,
    )
    for exception, handler in HANDLERS.items():
        app.add_exception_handler(exception, handler)
    # The faces (web.faces.FACES), in the order their routes are matched.
    for face in FACES:
        app.include_router(import_module(face).router)
    # Sign-in with an OpenID provider, where the settings name one (its routes are built from
    # them).
    app.include_router(sign_in.oidc_router(settings), include_in_schema=False)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    # Outermost first: headers on every response, then the body limit.
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(SecurityHeaders)
    instrument(app)
    return app


def _lifespan(
    settings: Settings,
    engine: Engine | None,
    database_url: str | None,
    with_worker: bool,
    migrate: bool,
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: its engine (the one given, or one opened on the database after
    applying migrations) and, ``with_worker``, the in-process worker."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if engine is not None:
                app.state.engine = engine
            else:
                url = database_url or revealed(settings.database_url)
                if not url:
                    raise RuntimeError("create_app needs a database URL or an engine")
                if migrate:
                    await upgrade(url)
                app.state.engine = await stack.enter_async_context(open_engine(url, settings))
            app.state.rules = app.state.engine.rules
            app.state.sessions.bind(app.state.engine.sessions)
            # Before the first connection is accepted (and so before /readyz says ready).
            compile_templates()
            await warm_up(app.state.engine)
            worker_task: asyncio.Task[None] | None = None
            stop = asyncio.Event()
            if with_worker:
                # The in-process worker: resumes decided runs, expires requests past their
                # deadline, notifies approvers of waiting and escalated requests.
                worker_task = asyncio.create_task(app.state.engine.work(stop))
            try:
                yield
            finally:
                stop.set()
                if worker_task is not None:
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.wait_for(worker_task, timeout=10)

    return lifespan


def openapi(settings: Settings) -> dict[str, Any]:
    """The OpenAPI document (for tooling; building it needs no database)."""
    return create_app(settings).openapi()
