"""The approvers' pages: sign in, the inbox, one request, decide it, the history.

Server-rendered (Jinja2, autoescaped), no inline script: every page works without JavaScript;
``/static/app.js`` only adds live updates (server-sent events) and countdowns. Identity comes
only from the server-side session that the signed cookie names (``web.security``). Every
state-changing form, the sign-in form included, carries a CSRF token and must come from the
configured public URL's origin.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from approvals.authz import ApproverRules
from approvals.errors import (
    ApprovalsError,
    EditedArgumentsInvalid,
    EditRefused,
    InvalidDecision,
    InvalidRequestId,
    NotAllowed,
    RequestNotFound,
)
from approvals.json_values import text_problem
from approvals.listing import Scope
from approvals.model import PendingCall, RequestStatus
from approvals.principals import Principal
from approvals.redaction import keep_redacted_fields
from web.edit_form import diff, edit_fields, parse_edit, typed
from web.engine import Engine
from web.errors import status_of
from web.faces.request_stream import open_stream
from web.list_query import Listing
from web.security import Session, Sessions, same_origin
from web.settings import Settings
from web.sign_in_throttle import SignInThrottle
from web.templating import templates

log = logging.getLogger("approvals.web")


class LoginRequired(Exception):
    pass


def _engine(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


def _rules(request: Request) -> ApproverRules:
    return _engine(request).rules


def _sessions(request: Request) -> Sessions:
    sessions: Sessions = request.app.state.sessions
    return sessions


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def signed_in(request: Request) -> Session:
    # Anything but a GET changes state: it asks the database, never this process's cache, so
    # a session ended a moment ago (sign-out elsewhere, the account disabled) decides nothing.
    session = await _sessions(request).read(request, fresh=request.method != "GET")
    if session is None:
        raise LoginRequired
    return session


SignedIn = Annotated[Session, Depends(signed_in)]


def check_form(request: Request, session: Session, csrf: str | None) -> None:
    """A state-changing form: the session's CSRF token and the app's own origin."""
    if not _sessions(request).csrf_ok(session, csrf):
        raise FormRefused("the form has expired or did not come from this site; reload and retry")
    if not same_origin(request, _settings(request).public_url):
        raise FormRefused(_foreign_origin(request))


def _foreign_origin(request: Request) -> str:
    return (
        "the form did not come from this site; open the app at "
        f"{_settings(request).public_url} (its configured public URL) and retry"
    )


class FormRefused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def render(
    request: Request,
    template: str,
    session: Session | None,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    csrf = _sessions(request).csrf_token(session) if session else None
    return templates.TemplateResponse(
        request,
        template,
        {
            "principal": session.principal if session else None,
            "csrf": csrf,
            "now": datetime.now(UTC),
            "oidc": _settings(request).oidc_enabled,
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
        session = await _sessions(request).read(request)
    except (ApprovalsError, RuntimeError):
        # The page that says what went wrong must not fail in turn (no database, no store).
        session = None
    return render(request, "error.html", session, status, status=status, message=message)


async def _request(request: Request, principal: Principal, request_id: str) -> PendingCall:
    """The request, if ``principal`` may see it; ``RequestNotFound`` otherwise (malformed ids
    too), which the error page shows as no such request."""
    try:
        return await _engine(request).visible_request(request_id, principal)
    except InvalidRequestId:
        raise RequestNotFound(request_id) from None


#: How many of the requests a principal may see but not decide the inbox's first page shows.
VIEW_ONLY_SHOWN = 10


def router() -> APIRouter:
    pages = APIRouter(include_in_schema=False)

    @pages.get("/favicon.ico")
    async def favicon() -> Response:
        return Response(status_code=204)

    @pages.get("/login")
    async def login_form(request: Request, next: str = "/") -> Response:
        return login_page(request, next=_safe_next(next))

    @pages.post("/login")
    async def login(
        request: Request,
        username: Annotated[str, Form(max_length=200)] = "",
        password: Annotated[str, Form(max_length=1024)] = "",
        next: Annotated[str, Form(max_length=500)] = "/",
        csrf: Annotated[str, Form(max_length=1000)] = "",
    ) -> Response:
        # Login CSRF: another site must not sign this browser in as someone else (whose
        # inbox the victim would then act in). The form's token must match this browser's
        # sign-in cookie, and the post must come from our own origin.
        if not _sessions(request).login_token_ok(request, csrf) or not same_origin(
            request, _settings(request).public_url
        ):
            log.warning("refused a sign-in form that did not come from this site")
            return login_page(
                request,
                403,
                error="The sign-in form expired or did not come from this site. Please sign in"
                " again.",
                next=_safe_next(next),
                username=username,
            )
        # This process's count, then the one every web process shares.
        throttle = SignInThrottle(request.app.state.throttle, _engine(request).sign_ins)
        client = request.client.host if request.client else "?"
        wait, counted = await throttle.attempt(username, client)
        if counted is None:
            return login_page(
                request,
                429,
                error=f"Too many failed sign-ins. Try again in {int(wait) + 1} seconds.",
                next=_safe_next(next),
                username=username,
            )
        principal = await _engine(request).accounts.authenticate(username, password)
        if principal is None:
            return login_page(
                request,
                401,
                error="Wrong user name or password.",
                next=_safe_next(next),
                username=username,
            )
        await throttle.succeeded(username, client, counted)
        return await sign_in(request, principal, _safe_next(next))

    @pages.post("/logout")
    async def logout(
        request: Request, session: SignedIn, csrf: Annotated[str, Form()] = ""
    ) -> Response:
        check_form(request, session, csrf)
        response = RedirectResponse("/login", status_code=303)
        await _sessions(request).end(response, session)
        return response

    @pages.get("/")
    async def inbox(request: Request, session: SignedIn) -> Response:
        # The inbox holds what this principal may decide, soonest deadline first, a page at a
        # time; what it may only see (its own runs' calls, or everything for operators) is
        # its own list (?scope=others), of which the first page shows a few.
        engine, listing = _engine(request), Listing.parse(request)
        scope = Scope.OTHERS if request.query_params.get("scope") == "others" else Scope.DECIDE
        page = await engine.pending_page(
            session.principal,
            scope=scope,
            order=listing.order,
            filters=listing.filters,
            cursor=listing.cursor,
        )
        view_only = None
        if scope is Scope.DECIDE and listing.cursor is None:
            view_only = await engine.pending_page(
                session.principal,
                scope=Scope.OTHERS,
                order=listing.order,
                filters=listing.filters,
                limit=VIEW_ONLY_SHOWN,
            )
        total, per_group = await engine.pending_counts(session.principal)
        return render(
            request,
            "inbox.html",
            session,
            scope=scope.value,
            items=[r for r, _ in page.items],
            view_only=[r for r, _ in view_only.items] if view_only else [],
            more_view_only=view_only is not None and view_only.next_cursor is not None,
            total=total,
            per_group=per_group,
            form=listing.form,
            next_page=listing.next_page(request, page.next_cursor),
            first_page=listing.first_page(request),
        )

    @pages.get("/requests/{request_id}")
    async def detail(request: Request, request_id: str, session: SignedIn) -> Response:
        return await _detail(request, session, request_id)

    @pages.post("/requests/{request_id}/approve")
    async def approve(
        request: Request, request_id: str, session: SignedIn, csrf: Annotated[str, Form()] = ""
    ) -> Response:
        check_form(request, session, csrf)
        found = await _request(request, session.principal, request_id)
        return await _decide(request, session, found, "approve")

    @pages.post("/requests/{request_id}/reject")
    async def reject(
        request: Request,
        request_id: str,
        session: SignedIn,
        csrf: Annotated[str, Form()] = "",
        reason: Annotated[str, Form(max_length=2000)] = "",
    ) -> Response:
        check_form(request, session, csrf)
        found = await _request(request, session.principal, request_id)
        required = _engine(request).settings.require_reject_reason
        error = (
            _text_error(reason, "A rejection needs a reason.", "The reason")
            if required or reason.strip()
            else None
        )
        if error is not None:
            return await _detail(request, session, found.id, 422, reject_error=error)
        return await _decide(request, session, found, "reject", reason=reason.strip() or None)

    @pages.post("/requests/{request_id}/respond")
    async def respond(
        request: Request,
        request_id: str,
        session: SignedIn,
        csrf: Annotated[str, Form()] = "",
        message: Annotated[str, Form(max_length=2000)] = "",
    ) -> Response:
        check_form(request, session, csrf)
        found = await _request(request, session.principal, request_id)
        # The answer is what the model receives: an empty or unstorable one is shown back
        # with the form, and nothing is consumed.
        error = _text_error(message, "A response needs an answer.", "The answer")
        if error is not None:
            return await _detail(request, session, found.id, 422, respond_error=error)
        return await _decide(request, session, found, "respond", message=message)

    @pages.post("/requests/{request_id}/edit")
    async def edit(request: Request, request_id: str, session: SignedIn) -> Response:
        form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
        check_form(request, session, form.get("csrf"))
        found = await _request(request, session.principal, request_id)
        _rules(request).check_decide(session.principal, found)
        if "edit" not in found.offered_decisions:
            raise InvalidDecision(found.id, "this request cannot be edited")
        args, errors = parse_edit(found.args_schema, form)
        # A redacted argument has no input in the form: it keeps the marker it was shown with.
        args, errors = keep_redacted_fields(args, errors, found.shown)
        proposed = found.shown.get("args") or {}
        defaulted = frozenset(n for n in args if form.get(f"arg.{n}") == "")
        escaped_as_typed = frozenset(
            n
            for n in found.args_schema.get("properties") or {}
            if form.get(f"enc.{n}") == "json" and n not in args
        )
        if not errors and form.get("confirm") == "1":
            try:
                return await _decide(request, session, found, "approve", args=args)
            except EditedArgumentsInvalid as exc:
                errors = [{"path": e.get("path", ""), "message": e["message"]} for e in exc.errors]
            except EditRefused as exc:
                # The policy refuses these arguments: say which rule, keep the form as typed.
                errors = [{"path": "", "message": exc.detail}]
        return render(
            request,
            "edit.html",
            session,
            422 if errors else 200,
            req=found,
            # What the approver typed stays in the form, even where it did not parse.
            fields=edit_fields(
                found.args_schema, typed(found.args_schema, form, args), escaped_as_typed
            ),
            errors={e["path"]: e["message"] for e in errors},
            diff=diff(proposed, args, defaulted),
            preview=not errors,
            args_json=json.dumps(args, sort_keys=True),
        )

    @pages.get("/history")
    async def history(request: Request, session: SignedIn) -> Response:
        listing = Listing.parse(request)
        page = await _engine(request).history_page(
            session.principal, filters=listing.filters, cursor=listing.cursor
        )
        return render(
            request,
            "history.html",
            session,
            rows=[{"request": r, **outcome} for r, outcome in page.items],
            form=listing.form,
            next_page=listing.next_page(request, page.next_cursor),
            first_page=listing.first_page(request),
        )

    @pages.get("/events")
    async def events(request: Request, session: SignedIn) -> Response:
        """Server-sent events of the requests this principal may see (``web.request_stream``,
        pushed, never polled); ``signed-out`` as soon as its session ends."""
        sessions = _sessions(request)

        async def still_signed_in() -> bool:
            current = await sessions.read(request, fresh=True)
            return current is not None and current.principal == session.principal

        return await open_stream(
            _engine(request), session.principal, still_signed_in, session_id=session.id
        )

    return pages


async def sign_in(request: Request, principal: Principal, next_url: str) -> Response:
    """A new server-side session for ``principal`` (password or OpenID Connect), and to
    ``next_url``."""
    response = RedirectResponse(next_url, status_code=303)
    sessions = _sessions(request)
    await sessions.start(response, principal, replacing=request)
    sessions.clear_login_cookie(response)
    return response


def login_page(request: Request, status_code: int = 200, **context: Any) -> Response:
    """The sign-in form, with its CSRF token and the cookie that token must match."""
    sessions = _sessions(request)
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


def _text_error(value: str, blank: str, label: str) -> str | None:
    """Why a form's free text (a reason, an answer) cannot be taken, or ``None``."""
    if not value.strip():
        return blank
    problem = text_problem(value)
    return f"{label} {problem}." if problem is not None else None


def _safe_next(value: str) -> str:
    """Only a path on this site (no scheme, no host, no //): open redirects are refused."""
    if not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


async def _detail(
    request: Request,
    session: Session,
    request_id: str,
    status_code: int = 200,
    **extra: Any,
) -> Response:
    engine, rules = _engine(request), _rules(request)
    found = await _request(request, session.principal, request_id)
    siblings = [
        r
        for r in await engine.requests.for_run(found.run_id)
        if r.id != found.id
        and r.status is RequestStatus.PENDING
        and rules.may_see(session.principal, r)
    ]
    why_not = None
    try:
        rules.check_decide(session.principal, found)
    except NotAllowed as exc:
        why_not = exc.why
    run = await engine.runs.get(found.run_id)
    executions = {e.call_id: e for e in await engine.ledger.for_run(found.run_id)}
    decision = None
    if found.status is not RequestStatus.PENDING:
        _, decision = await engine.requests.decision_of(found.id)
    votes = await engine.requests.votes(found.id) if found.quorum > 1 else []
    # Per person: a vote cast with one of the person's API tokens is theirs too.
    earlier = await engine.requests.vote_of(found.id, session.principal.person) if votes else None
    if why_not is None and earlier is not None:
        as_whom = "" if earlier == session.principal.id else f" (as {earlier})"
        why_not = f"you already approved it{as_whom}; it waits for other approvers"
    return render(
        request,
        "detail.html",
        session,
        status_code,
        req=found,
        siblings=siblings,
        why_not=why_not,
        run=run,
        # The run's answer and its tools' errors may quote an argument redacted from approvers.
        readable=run is not None and rules.may_read_run(session.principal, run),
        execution=executions.get(found.call_id),
        decision=decision,
        votes=votes,
        **extra,
    )


async def _decide(
    request: Request,
    session: Session,
    found: PendingCall,
    verdict: str,
    *,
    reason: str | None = None,
    args: dict[str, Any] | None = None,
    message: str | None = None,
) -> Response:
    await _engine(request).decide(
        found.id, verdict, principal=session.principal, reason=reason, args=args, message=message
    )
    return RedirectResponse(f"/requests/{found.id}", status_code=303)
