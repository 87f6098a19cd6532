"""Signing in and out: the sign-in form (``/login``), sign-out (``/logout``) and, when it is
configured, sign-in through OpenID Connect (``web.faces.pages.oidc``).

Identity comes only from the server-side session that the signed cookie names
(``web.security``). The sign-in form carries a CSRF token of its own (there is no session yet)
and must come from the configured public URL's origin, like every state-changing form.
"""

from __future__ import annotations

import logging
import re
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from approvals.principals import Principal
from web.channels.slack_app import SlackDesk
from web.deps import EngineDep, SignedIn, engine_of, sessions_of, settings_of
from web.faces.pages.oidc import CALLBACK_PATH, SLACK_USER_STATE, OidcLogin
from web.faces.pages.rendering import check_form, render, status_page
from web.security import same_origin
from web.settings import Settings, revealed
from web.sign_in_throttle import SignInThrottle

log = logging.getLogger("approvals.web")
#: A Slack user id (``U...``, or ``W...`` on Enterprise Grid), as a click's ``user.id``.
SLACK_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,30}$")

#: The sign-in form and sign-out.
router = APIRouter(include_in_schema=False)


@router.get("/login")
async def login_form(request: Request, next: str = "/") -> Response:
    return login_page(request, next=safe_next(next))


@router.post("/login")
async def login(
    request: Request,
    engine: EngineDep,
    username: Annotated[str, Form(max_length=200)] = "",
    password: Annotated[str, Form(max_length=1024)] = "",
    next: Annotated[str, Form(max_length=500)] = "/",
    csrf: Annotated[str, Form(max_length=1000)] = "",
) -> Response:
    # Login CSRF: another site must not sign this browser in as someone else (whose
    # inbox the victim would then act in). The form's token must match this browser's
    # sign-in cookie, and the post must come from our own origin.
    if not sessions_of(request).login_token_ok(request, csrf) or not same_origin(
        request, settings_of(request).public_url
    ):
        log.warning("refused a sign-in form that did not come from this site")
        return login_page(
            request,
            403,
            error="The sign-in form expired or did not come from this site. Please sign in again.",
            next=safe_next(next),
            username=username,
        )
    # This process's count, then the one every web process shares.
    throttle = SignInThrottle(request.app.state.throttle, engine.sign_ins)
    client = request.client.host if request.client else "?"
    wait, counted = await throttle.attempt(username, client)
    if counted is None:
        return login_page(
            request,
            429,
            error=f"Too many failed sign-ins. Try again in {int(wait) + 1} seconds.",
            next=safe_next(next),
            username=username,
        )
    principal = await engine.accounts.authenticate(username, password)
    if principal is None:
        return login_page(
            request,
            401,
            error="Wrong user name or password.",
            next=safe_next(next),
            username=username,
        )
    await throttle.succeeded(username, client, counted)
    return await sign_in(request, principal, safe_next(next))


@router.post("/logout")
async def logout(
    request: Request, session: SignedIn, csrf: Annotated[str, Form()] = ""
) -> Response:
    check_form(request, session, csrf)
    response = RedirectResponse("/login", status_code=303)
    await sessions_of(request).end(response, session)
    return response


async def sign_in(request: Request, principal: Principal, next_url: str) -> Response:
    """A new server-side session for ``principal`` (password or OpenID Connect), and to
    ``next_url``."""
    response = RedirectResponse(next_url, status_code=303)
    sessions = sessions_of(request)
    await sessions.start(response, principal, replacing=request)
    sessions.clear_login_cookie(response)
    return response


def login_page(request: Request, status_code: int = 200, **context: Any) -> Response:
    """The sign-in form, with its CSRF token and the cookie that token must match."""
    sessions = sessions_of(request)
    nonce = sessions.login_nonce(request)
    response = render(
        request,
        "login.html",
        None,
        status_code,
        login_csrf=sessions.login_form_token(nonce),
        **context,
    )
    sessions.set_login_cookie(response, nonce)
    return response


def safe_next(value: str) -> str:
    """Only a path on this site (no scheme, no host, no //): open redirects are refused."""
    if not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


def oidc_router(settings: Settings) -> APIRouter:
    """``/login/oidc`` and its callback when OpenID Connect is configured; no routes (both
    answer 404) when it is not."""
    if not (settings.oidc_issuer and settings.oidc_client_id and settings.oidc_client_secret):
        return APIRouter()
    oidc = OidcLogin(
        issuer=settings.oidc_issuer,
        client_id=settings.oidc_client_id,
        client_secret=revealed(settings.oidc_client_secret) or "",
        redirect_uri=settings.public_url.rstrip("/") + CALLBACK_PATH,
        scopes=settings.oidc_scopes,
        groups_claim=settings.oidc_groups_claim,
        slack_claim=settings.slack_oidc_claim,
        on_login=_oidc_signed_in,
        on_error=_oidc_failed,
    )
    return oidc.router()


async def _oidc_signed_in(request: Request, principal: Principal) -> Response:
    log.info("signed in %s through OpenID Connect", principal.id)
    slack_user = getattr(request.state, SLACK_USER_STATE, None)
    if slack_user is not None:
        await _link_slack(request, principal, slack_user)
    return await sign_in(request, principal, "/")


async def _link_slack(request: Request, principal: Principal, slack_user: str) -> None:
    """Link the Slack user the ID token's ``APPROVALS_SLACK_OIDC_CLAIM`` names to the principal
    that signed in (docs/notifications.md, "Deciding from Slack"); a value that is no Slack
    user id links nothing, and a failure to link does not fail the sign-in."""
    if not SLACK_USER_ID.match(slack_user):
        log.warning("%s signed in with a Slack claim that is no Slack user id", principal.id)
        return
    engine = engine_of(request)
    try:
        links = SlackDesk.on(engine.adapters.db, settings_of(request)).links
        if await links.link_oidc(slack_user, principal.id):
            log.info("Slack user %s linked to %s", slack_user, principal.id)
    except Exception:
        log.exception("linking Slack user %s to %s failed", slack_user, principal.id)


async def _oidc_failed(request: Request, message: str, status: int) -> Response:
    log.warning("OpenID Connect sign-in failed (%s): %s", status, message)
    return await status_page(request, status, message)
