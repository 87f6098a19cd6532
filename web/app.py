"""The approvers' web app: ``create_app(settings)`` builds it; nothing lives at module level.

The app owns an engine for its lifetime (or uses one it is given, in tests), the session and
CSRF machinery, the JSON API under ``/api/v1`` and the HTML pages. ``with_worker`` also runs a
resume worker in the same process, so a decision made in the browser resumes its run without a
separate ``approvals worker``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from approvals.errors import ApprovalsError
from approvals.principals import Principal
from web import audit_pages, pages
from web.engine import Engine, open_engine, upgrade
from web.errors import ApiError, status_of
from web.faces import api, api_docs, monitoring
from web.oidc import CALLBACK_PATH, OidcLogin
from web.security import BodyLimit, LoginThrottle, SecurityHeaders, Sessions, secret_key
from web.settings import Settings

log = logging.getLogger("approvals.web")
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

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if engine is not None:
                app.state.engine = engine
            else:
                url = database_url or settings.database_url
                if not url:
                    raise RuntimeError("create_app needs a database URL or an engine")
                if migrate:
                    await upgrade(url)
                app.state.engine = await stack.enter_async_context(open_engine(url, settings))
            app.state.rules = app.state.engine.rules
            app.state.sessions.bind(app.state.engine.sessions)
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

    app = FastAPI(
        title="approvals",
        version="0.1.0",
        summary="Human approval of AI agents' sensitive tool calls",
        lifespan=lifespan,
        # Our own /api/docs (web.api_docs): FastAPI's loads a CDN with an inline script.
        docs_url=None,
        redoc_url=None,
        openapi_url="/api/openapi.json",
    )
    app.state.settings = settings
    app.state.api_gate = asyncio.Semaphore(api.gate_size(settings))
    app.state.sessions = Sessions(
        secret_key(settings.secret_key, settings.data_dir),
        ttl_seconds=settings.session_ttl_seconds,
        secure=settings.public_url.startswith("https://"),
        cache_seconds=settings.session_cache_seconds,
    )
    app.state.throttle = LoginThrottle(
        settings.login_attempts,
        settings.login_window_seconds,
        account_attempts=settings.login_account_attempts,
    )

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> Response:
        if exc.status in (401, 403):
            log.warning("refused %s %s: %s", request.method, request.url.path, exc.message)
        headers = {"www-authenticate": "Bearer"} if exc.status == 401 else None
        return JSONResponse(exc.body(), status_code=exc.status, headers=headers)

    @app.exception_handler(ApprovalsError)
    async def engine_error(request: Request, exc: ApprovalsError) -> Response:
        status, _ = status_of(exc)
        if status in (401, 403):
            log.warning("refused %s %s: %s", request.method, request.url.path, exc)
        if not request.url.path.startswith("/api/"):
            return await pages.error_page(request, exc)
        return await api_error(request, ApiError.from_error(exc))

    @app.exception_handler(pages.LoginRequired)
    async def login_required(request: Request, exc: pages.LoginRequired) -> Response:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/login?{urlencode({'next': target})}", status_code=303)

    @app.exception_handler(pages.FormRefused)
    async def form_refused(request: Request, exc: pages.FormRefused) -> Response:
        log.warning("refused a form on %s: %s", request.url.path, exc.message)
        return await pages.status_page(request, 403, exc.message)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        details = [
            {"path": "/".join(str(p) for p in e["loc"]), "message": _problem(e)}
            for e in exc.errors()
        ]
        error = ApiError(
            422, "invalid_input", details[0]["message"] if details else "invalid", details
        )
        return await api_error(request, error)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if request.url.path.startswith("/api/"):
            if exc.status_code == 400:
                # FastAPI's answer to a body it cannot decode (not UTF-8, say): invalid input,
                # like any other body that is not JSON.
                error = ApiError(422, "invalid_input", "the request body is not valid JSON")
                return await api_error(request, error)
            code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
            return await api_error(request, ApiError(exc.status_code, code, str(exc.detail)))
        return await pages.status_page(request, exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        if isinstance(exc, ApprovalsError):  # pragma: no cover - handled above
            status, code = status_of(exc)
            return await api_error(request, ApiError(status, code, str(exc)))
        return await api_error(request, ApiError(500, "internal", "an unexpected error occurred"))

    app.include_router(api.router())
    app.include_router(pages.router())
    app.include_router(monitoring.router())
    app.include_router(audit_pages.router())
    app.include_router(api_docs.router("/api/openapi.json"))
    if settings.oidc_issuer and settings.oidc_client_id and settings.oidc_client_secret:

        async def oidc_signed_in(request: Request, principal: Principal) -> Response:
            log.info("signed in %s through OpenID Connect", principal.id)
            return await pages.sign_in(request, principal, "/")

        async def oidc_failed(request: Request, message: str, status: int) -> Response:
            log.warning("OpenID Connect sign-in failed (%s): %s", status, message)
            return await pages.status_page(request, status, message)

        oidc = OidcLogin(
            issuer=settings.oidc_issuer,
            client_id=settings.oidc_client_id,
            client_secret=settings.oidc_client_secret,
            redirect_uri=settings.public_url.rstrip("/") + CALLBACK_PATH,
            scopes=settings.oidc_scopes,
            groups_claim=settings.oidc_groups_claim,
            on_login=oidc_signed_in,
            on_error=oidc_failed,
        )
        app.include_router(oidc.router(), include_in_schema=False)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    # Outermost first: headers on every response, then the body limit.
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(SecurityHeaders)
    return app


def openapi(settings: Settings) -> dict[str, Any]:
    """The OpenAPI document (for tooling; building it needs no database)."""
    return create_app(settings).openapi()


def _problem(error: Any) -> str:
    """What a validation error tells the client: a body that is not JSON says why."""
    if error.get("type") == "json_invalid":
        why = (error.get("ctx") or {}).get("error")
        return f"the request body is not valid JSON: {why}" if why else "not valid JSON"
    return str(error["msg"])
