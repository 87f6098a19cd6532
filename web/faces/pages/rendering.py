"""What every page shares: a template rendered with the signed-in context, the error pages,
and the check every state-changing form passes (its CSRF token and the app's own origin)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, Response

from approvals.errors import ApprovalsError, InvalidRequestId, RequestNotFound
from approvals.model import PendingCall
from approvals.principals import Principal
from web.deps import sessions_of, settings_of
from web.engine import Engine
from web.errors import status_of
from web.faces.pages.templating import templates
from web.security import Session, same_origin


class FormRefused(Exception):
    """A state-changing form without this session's CSRF token, or from another origin: the
    app answers with a 403 page that says ``message``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def check_form(request: Request, session: Session, csrf: str | None) -> None:
    """A state-changing form: the session's CSRF token and the app's own origin."""
    if not sessions_of(request).csrf_ok(session, csrf):
        raise FormRefused("the form has expired or did not come from this site; reload and retry")
    if not same_origin(request, settings_of(request).public_url):
        raise FormRefused(_foreign_origin(request))


def _foreign_origin(request: Request) -> str:
    return (
        "the form did not come from this site; open the app at "
        f"{settings_of(request).public_url} (its configured public URL) and retry"
    )


def render(
    request: Request,
    template: str,
    session: Session | None,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    csrf = sessions_of(request).csrf_token(session) if session else None
    return templates.TemplateResponse(
        request,
        template,
        {
            "principal": session.principal if session else None,
            "csrf": csrf,
            "now": datetime.now(UTC),
            "oidc": settings_of(request).oidc_enabled,
            **context,
        },
        status_code=status_code,
    )


async def error_page(request: Request, exc: ApprovalsError) -> Response:
    status, _ = status_of(exc)
    message = str(exc)
    if isinstance(exc, InvalidRequestId | RequestNotFound):
        status, message = 404, "There is no such request, or it is not one you may see."
    return await status_page(request, status, message)


async def status_page(request: Request, status: int, message: str) -> Response:
    try:
        session = await sessions_of(request).read(request)
    except (ApprovalsError, RuntimeError):
        # The page that says what went wrong must not fail in turn (no database, no store).
        session = None
    return render(request, "error.html", session, status, status=status, message=message)


async def visible_request(engine: Engine, principal: Principal, request_id: str) -> PendingCall:
    """The request, if ``principal`` may see it; ``RequestNotFound`` otherwise (malformed ids
    too), which the error page shows as no such request."""
    try:
        return await engine.visible_request(request_id, principal)
    except InvalidRequestId:
        raise RequestNotFound(request_id) from None
