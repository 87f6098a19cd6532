"""One request (``/requests/{id}``): what it will run, its run's other waiting calls, who
decided it (or why this approver may not), and the forms that approve, reject or respond.

Every form carries the session's CSRF token and must come from the configured public URL's
origin (``check_form``); the decision itself is the engine's, taken as the signed-in principal.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from approvals.decision_kinds import Ruling
from approvals.errors import NotAllowed
from approvals.json_values import text_problem
from approvals.model import PendingCall, RequestStatus
from web.deps import EngineDep, SignedIn, engine_of
from web.faces.pages.rendering import check_form, render, visible_request
from web.security import Session

#: One request's page and the forms that decide it (the edit form: ``web.faces.pages.edit``).
router = APIRouter(include_in_schema=False)


@router.get("/requests/{request_id}")
async def detail(request: Request, request_id: str, session: SignedIn) -> Response:
    return await show(request, session, request_id)


@router.post("/requests/{request_id}/approve")
async def approve(
    request: Request,
    request_id: str,
    session: SignedIn,
    engine: EngineDep,
    csrf: Annotated[str, Form()] = "",
    always: Annotated[str, Form()] = "",
) -> Response:
    check_form(request, session, csrf)
    found = await visible_request(engine, session.principal, request_id)
    return await decide(request, session, found, Ruling.APPROVE, always=bool(always))


@router.post("/requests/{request_id}/reject")
async def reject(
    request: Request,
    request_id: str,
    session: SignedIn,
    engine: EngineDep,
    csrf: Annotated[str, Form()] = "",
    reason: Annotated[str, Form(max_length=2000)] = "",
    always: Annotated[str, Form()] = "",
) -> Response:
    check_form(request, session, csrf)
    found = await visible_request(engine, session.principal, request_id)
    required = engine.settings.require_reject_reason
    error = (
        _text_error(reason, "A rejection needs a reason.", "The reason")
        if required or reason.strip()
        else None
    )
    if error is not None:
        return await show(request, session, found.id, 422, reject_error=error)
    return await decide(
        request, session, found, Ruling.REJECT, reason=reason.strip() or None, always=bool(always)
    )


@router.post("/requests/{request_id}/respond")
async def respond(
    request: Request,
    request_id: str,
    session: SignedIn,
    engine: EngineDep,
    csrf: Annotated[str, Form()] = "",
    message: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    check_form(request, session, csrf)
    found = await visible_request(engine, session.principal, request_id)
    # The answer is what the model receives: an empty or unstorable one is shown back
    # with the form, and nothing is consumed.
    error = _text_error(message, "A response needs an answer.", "The answer")
    if error is not None:
        return await show(request, session, found.id, 422, respond_error=error)
    return await decide(request, session, found, Ruling.RESPOND, message=message)


def _text_error(value: str, blank: str, label: str) -> str | None:
    """Why a form's free text (a reason, an answer) cannot be taken, or ``None``."""
    if not value.strip():
        return blank
    problem = text_problem(value)
    return f"{label} {problem}." if problem is not None else None


async def show(
    request: Request,
    session: Session,
    request_id: str,
    status_code: int = 200,
    **extra: Any,
) -> Response:
    """The request's page, as ``session``'s principal may see it (``extra``: a form's error)."""
    engine = engine_of(request)
    rules = engine.rules
    found = await visible_request(engine, session.principal, request_id)
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


async def decide(
    request: Request,
    session: Session,
    found: PendingCall,
    verdict: Ruling,
    *,
    reason: str | None = None,
    args: dict[str, Any] | None = None,
    message: str | None = None,
    always: bool = False,
) -> Response:
    """``session``'s principal decides ``found``; then back to the request's page. ``always``:
    the "always" button of the approve or reject form (a standing grant, ``approvals.grants``)."""
    await engine_of(request).decide(
        found.id,
        verdict,
        principal=session.principal,
        reason=reason,
        args=args,
        message=message,
        always=always,
    )
    return RedirectResponse(f"/requests/{found.id}", status_code=303)
