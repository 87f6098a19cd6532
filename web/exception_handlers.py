"""How the app answers what a face raises: under ``/api/`` the JSON error body (``web.errors``),
elsewhere an error page; a page that needs a session redirects to the sign-in form.

``HANDLERS`` is what ``web.app.create_app`` installs, one handler per kind of exception.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from approvals.errors import ApprovalsError
from web.deps import LoginRequired
from web.errors import ApiError, status_of
from web.faces.pages.rendering import FormRefused, error_page, status_page

log = logging.getLogger("approvals.web")


async def api_error(request: Request, exc: ApiError) -> Response:
    if exc.status in (401, 403):
        log.warning("refused %s %s: %s", request.method, request.url.path, exc.message)
    headers = {"www-authenticate": "Bearer"} if exc.status == 401 else None
    return JSONResponse(exc.body(), status_code=exc.status, headers=headers)


async def engine_error(request: Request, exc: ApprovalsError) -> Response:
    status, _ = status_of(exc)
    if status in (401, 403):
        log.warning("refused %s %s: %s", request.method, request.url.path, exc)
    if not request.url.path.startswith("/api/"):
        response = await error_page(request, exc)
    else:
        response = await api_error(request, ApiError.from_error(exc))
    retry_after = getattr(exc, "retry_after", None)
    if isinstance(retry_after, int):
        # A refusal that says when to come back (StartsBusy): RFC 9110 section 10.2.3.
        response.headers["retry-after"] = str(retry_after)
    return response


async def login_required(request: Request, exc: LoginRequired) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/login?{urlencode({'next': target})}", status_code=303)


async def form_refused(request: Request, exc: FormRefused) -> Response:
    log.warning("refused a form on %s: %s", request.url.path, exc.message)
    return await status_page(request, 403, exc.message)


async def invalid(request: Request, exc: RequestValidationError) -> Response:
    details = [
        {"path": "/".join(str(p) for p in e["loc"]), "message": _problem(e)} for e in exc.errors()
    ]
    error = ApiError(422, "invalid_input", details[0]["message"] if details else "invalid", details)
    return await api_error(request, error)


async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
    if request.url.path.startswith("/api/"):
        if exc.status_code == 400:
            # FastAPI's answer to a body it cannot decode (not UTF-8, say): invalid input,
            # like any other body that is not JSON.
            error = ApiError(422, "invalid_input", "the request body is not valid JSON")
            return await api_error(request, error)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return await api_error(request, ApiError(exc.status_code, code, str(exc.detail)))
    return await status_page(request, exc.status_code, str(exc.detail))


async def unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    if isinstance(exc, ApprovalsError):  # pragma: no cover - handled above
        status, code = status_of(exc)
        return await api_error(request, ApiError(status, code, str(exc)))
    return await api_error(request, ApiError(500, "internal", "an unexpected error occurred"))


def _problem(error: Any) -> str:
    """What a validation error tells the client: a body that is not JSON says why."""
    if error.get("type") == "json_invalid":
        why = (error.get("ctx") or {}).get("error")
        return f"the request body is not valid JSON: {why}" if why else "not valid JSON"
    return str(error["msg"])


#: Each kind of exception and the handler that answers it.
HANDLERS: dict[type[Exception], Callable[[Request, Any], Awaitable[Response]]] = {
    ApiError: api_error,
    ApprovalsError: engine_error,
    LoginRequired: login_required,
    FormRefused: form_refused,
    RequestValidationError: invalid,
    StarletteHTTPException: http_error,
    Exception: unexpected,
}
