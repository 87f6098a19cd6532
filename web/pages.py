"""The approvers' pages: sign in, the inbox, one request, decide it, the history.

Server-rendered (Jinja2, autoescaped), no inline script: every page works without JavaScript;
``/static/app.js`` only adds live updates (server-sent events) and countdowns. Identity comes
from the signed session cookie only. Every state-changing form carries the session's CSRF token
and must come from the app's own origin.
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from fastapi.templating import Jinja2Templates

from approvals.authz import ApproverRules
from approvals.decisions import parse_request_id
from approvals.errors import (
    ApprovalsError,
    EditedArgumentsInvalid,
    InvalidDecision,
    InvalidRequestId,
    NotAllowed,
    RequestNotFound,
)
from approvals.model import ApprovalRequest, RequestStatus
from approvals.principals import Principal
from web.engine import Engine
from web.errors import status_of
from web.security import LoginThrottle, Session, Sessions, same_origin
from web.settings import Settings

HERE = Path(__file__).resolve().parent
log = logging.getLogger("approvals.web")
templates = Jinja2Templates(directory=str(HERE / "templates"))


class LoginRequired(Exception):
    pass


def _engine(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


def _rules(request: Request) -> ApproverRules:
    rules: ApproverRules = request.app.state.rules
    return rules


def _sessions(request: Request) -> Sessions:
    sessions: Sessions = request.app.state.sessions
    return sessions


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def signed_in(request: Request) -> Session:
    session = _sessions(request).read(request)
    if session is None:
        raise LoginRequired
    return session


SignedIn = Annotated[Session, Depends(signed_in)]


def check_form(request: Request, session: Session, csrf: str | None) -> None:
    """A state-changing form: the session's CSRF token and the app's own origin."""
    if not _sessions(request).csrf_ok(session, csrf):
        raise FormRefused("the form has expired or did not come from this site; reload and retry")
    if not same_origin(request, _settings(request).public_url):
        raise FormRefused("the form did not come from this site")


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
    session = _sessions(request).read(request)
    return render(request, "error.html", session, status, status=status, message=message)


def _visible(
    request: Request, principal: Principal, found: ApprovalRequest | None
) -> ApprovalRequest:
    if found is None or not _rules(request).may_see(principal, found):
        if found is not None:
            log.warning(
                "refused to show request %s to %s (not an approver)", found.id, principal.id
            )
        raise RequestNotFound("")
    return found


async def _request(request: Request, principal: Principal, request_id: str) -> ApprovalRequest:
    try:
        canonical = parse_request_id(request_id)
    except InvalidRequestId:
        raise RequestNotFound(request_id) from None
    return _visible(request, principal, await _engine(request).requests.get(canonical))


def time_left(expires_at: datetime) -> str:
    seconds = int((expires_at - datetime.now(UTC)).total_seconds())
    if seconds <= 0:
        return "expired"
    hours, rest = divmod(seconds, 3600)
    minutes = rest // 60
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"


def age(created_at: datetime) -> str:
    seconds = int((datetime.now(UTC) - created_at).total_seconds())
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 86400:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} d ago"


templates.env.filters["time_left"] = time_left
templates.env.filters["age"] = age
templates.env.filters["pretty"] = lambda v: json.dumps(v, indent=2, sort_keys=True)


def edit_fields(schema: dict[str, Any], values: dict[str, Any]) -> list[dict[str, Any]]:
    """The edit form's fields, from the tool's JSON schema (top-level properties)."""
    required = set(schema.get("required") or [])
    fields = []
    for name, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type", "string")
        fields.append(
            {
                "name": name,
                "type": kind if kind in ("string", "number", "integer", "boolean") else "json",
                "title": prop.get("title") or name,
                "description": prop.get("description"),
                "required": name in required,
                "value": values.get(name, prop.get("default")),
                "pattern": prop.get("pattern"),
                "minimum": prop.get("minimum", prop.get("exclusiveMinimum")),
                "maximum": prop.get("maximum", prop.get("exclusiveMaximum")),
                "max_length": prop.get("maxLength"),
            }
        )
    return fields


def parse_edit(
    schema: dict[str, Any], form: dict[str, str]
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """Edited arguments from the form, typed by the schema; errors per field."""
    args: dict[str, Any] = {}
    errors: list[dict[str, str]] = []
    for field in edit_fields(schema, {}):
        name, kind = field["name"], field["type"]
        raw = form.get(f"arg.{name}")
        if kind == "boolean":
            args[name] = raw == "on"
            continue
        if raw is None or raw == "":
            if field["required"]:
                errors.append({"path": name, "message": "is required"})
            continue
        try:
            if kind == "integer":
                args[name] = int(raw)
            elif kind == "number":
                args[name] = float(raw)
            elif kind == "json":
                args[name] = json.loads(raw)
            else:
                args[name] = raw
        except ValueError:
            errors.append({"path": name, "message": f"is not a valid {kind}"})
    return args, errors


def typed(schema: dict[str, Any], form: dict[str, str], parsed: dict[str, Any]) -> dict[str, Any]:
    """The values to show back in the edit form: parsed ones, else the raw text typed."""
    values: dict[str, Any] = {}
    for name in schema.get("properties") or {}:
        if name in parsed:
            values[name] = parsed[name]
        elif f"arg.{name}" in form:
            values[name] = form[f"arg.{name}"]
    return values


def diff(proposed: dict[str, Any], edited: dict[str, Any]) -> list[dict[str, Any]]:
    keys = list(dict.fromkeys([*proposed, *edited]))
    return [
        {
            "name": k,
            "proposed": proposed.get(k),
            "edited": edited.get(k),
            "changed": proposed.get(k) != edited.get(k),
        }
        for k in keys
    ]


def router() -> APIRouter:
    pages = APIRouter(include_in_schema=False)

    @pages.get("/favicon.ico")
    async def favicon() -> Response:
        return Response(status_code=204)

    @pages.get("/login")
    async def login_form(request: Request, next: str = "/") -> Response:
        return render(request, "login.html", None, next=_safe_next(next))

    @pages.post("/login")
    async def login(
        request: Request,
        username: Annotated[str, Form(max_length=200)] = "",
        password: Annotated[str, Form(max_length=1024)] = "",
        next: Annotated[str, Form(max_length=500)] = "/",
    ) -> Response:
        throttle: LoginThrottle = request.app.state.throttle
        client = request.client.host if request.client else "?"
        wait = throttle.blocked(username, client)
        if wait:
            return render(
                request,
                "login.html",
                None,
                429,
                error=f"Too many failed sign-ins. Try again in {int(wait) + 1} seconds.",
                next=_safe_next(next),
                username=username,
            )
        principal = await _engine(request).accounts.authenticate(username, password)
        if principal is None:
            throttle.failed(username, client)
            return render(
                request,
                "login.html",
                None,
                401,
                error="Wrong user name or password.",
                next=_safe_next(next),
                username=username,
            )
        throttle.succeeded(username, client)
        return sign_in(request, principal, _safe_next(next))

    @pages.post("/logout")
    async def logout(
        request: Request, session: SignedIn, csrf: Annotated[str, Form()] = ""
    ) -> Response:
        check_form(request, session, csrf)
        response = RedirectResponse("/login", status_code=303)
        _sessions(request).end(response)
        return response

    @pages.get("/")
    async def inbox(request: Request, session: SignedIn) -> Response:
        principal, rules = session.principal, _rules(request)
        pending = await _engine(request).requests.search(RequestStatus.PENDING, 500)
        # The inbox holds what this principal may decide; what it may only see (its own runs'
        # calls, or everything for operators) is counted and listed apart.
        items = [r for r in pending if rules.may_decide(principal, r)]
        view_only = [
            r for r in pending if rules.may_see(principal, r) and not rules.may_decide(principal, r)
        ]
        return render(request, "inbox.html", session, items=items, view_only=view_only)

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
        if not reason.strip():
            return await _detail(
                request, session, found.id, 422, reject_error="A rejection needs a reason."
            )
        return await _decide(request, session, found, "reject", reason=reason.strip())

    @pages.post("/requests/{request_id}/edit")
    async def edit(request: Request, request_id: str, session: SignedIn) -> Response:
        form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
        check_form(request, session, form.get("csrf"))
        found = await _request(request, session.principal, request_id)
        _rules(request).check_decide(session.principal, found)
        if not found.allow_edit or found.quorum > 1:
            raise InvalidDecision(
                found.id, "this request cannot be edited, only approved or rejected"
            )
        args, errors = parse_edit(found.args_schema, form)
        proposed = found.shown.get("args") or {}
        if not errors and form.get("confirm") == "1":
            try:
                return await _decide(request, session, found, "approve", args=args)
            except EditedArgumentsInvalid as exc:
                errors = [{"path": e.get("path", ""), "message": e["message"]} for e in exc.errors]
        return render(
            request,
            "edit.html",
            session,
            422 if errors else 200,
            req=found,
            # What the approver typed stays in the form, even where it did not parse.
            fields=edit_fields(found.args_schema, typed(found.args_schema, form, args)),
            errors={e["path"]: e["message"] for e in errors},
            diff=diff(proposed, args),
            preview=not errors,
            args_json=json.dumps(args, sort_keys=True),
        )

    @pages.get("/history")
    async def history(request: Request, session: SignedIn) -> Response:
        principal, rules = session.principal, _rules(request)
        rows = [
            {"request": r, **outcome}
            for r, outcome in await _engine(request).requests.decided(500)
            if rules.may_see(principal, r)
        ][:100]
        return render(request, "history.html", session, rows=rows)

    @pages.get("/events")
    async def events(request: Request, session: SignedIn) -> Response:
        """Server-sent events: ``changed`` whenever a request arrives or is decided."""
        engine = _engine(request)

        async def stream() -> Any:
            last = None
            yield "retry: 3000\n\n"
            while not await request.is_disconnected():
                mark = await engine.requests.version()
                if last is not None and mark != last:
                    yield "event: changed\ndata: {}\n\n"
                last = mark
                await asyncio.sleep(1.5)

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"cache-control": "no-store"}
        )

    return pages


def sign_in(request: Request, principal: Principal, next_url: str) -> Response:
    response = RedirectResponse(next_url, status_code=303)
    _sessions(request).start(response, principal)
    return response


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
    if why_not is None and session.principal.id in votes:
        why_not = "you already approved it; it waits for other approvers"
    return render(
        request,
        "detail.html",
        session,
        status_code,
        req=found,
        siblings=siblings,
        why_not=why_not,
        run=run,
        execution=executions.get(found.call_id),
        decision=decision,
        votes=votes,
        **extra,
    )


async def _decide(
    request: Request,
    session: Session,
    found: ApprovalRequest,
    verdict: str,
    *,
    reason: str | None = None,
    args: dict[str, Any] | None = None,
) -> Response:
    _rules(request).check_decide(session.principal, found)
    await _engine(request).decide(
        found.id, verdict, principal=session.principal.id, reason=reason, args=args
    )
    return RedirectResponse(f"/requests/{found.id}", status_code=303)
