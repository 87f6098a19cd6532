"""One-time e-mail links (``/email-links/{token}``): an approver decides from the e-mail that
told them a call waits (``web.channels.smtp`` writes the links).

- ``GET`` decides nothing (mail scanners open links): it shows what will run and one button.
- ``POST`` (that button: its form token matches a cookie the ``GET`` set, and it comes from the
  configured public URL's origin) decides through the engine as the link's account, with every
  rule the web applies: its groups now, separation of duties, quorum, the decisions the request
  offers, expiry.
- A link is single-use: it decides only while its account has not decided its request (the
  decision, or the vote, is the record of its use). A reuse, an expired link, a disabled
  account or one no longer allowed is refused, decides nothing, and is audited
  (``email_link.refused``, why in its data); a link that decided is audited as
  ``email_link.used``.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse
from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer

from approvals.decision_kinds import KIND_RULES
from approvals.errors import (
    AlreadyVoted,
    InvalidDecision,
    InvalidRequestId,
    InvalidValue,
    NotAllowed,
    RequestNotFound,
    RequestNotPending,
)
from approvals.model import DecisionRecord, PendingCall, RequestStatus, Vote
from approvals.principals import Principal
from web.channels.smtp import LINK_PATH, LinkClaim, LinkDesk
from web.deps import EngineDep, settings_of
from web.engine import Engine
from web.faces.pages.templating import templates
from web.security import same_origin, secret_key
from web.settings import revealed

#: The confirmation pages and their buttons.
router = APIRouter(include_in_schema=False)

COOKIE = "approvals_email_link"
#: How long a confirmation page may sit before its button is pressed.
FORM_SECONDS = 3600


@functools.lru_cache(maxsize=4)
def _serializers(key: str) -> tuple[URLSafeTimedSerializer, URLSafeTimedSerializer]:
    return (
        URLSafeTimedSerializer(key, salt="approvals.email-link.cookie"),
        URLSafeTimedSerializer(key, salt="approvals.email-link.form"),
    )


def _link_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:32]


def _form_ok(request: Request, token: str, form_token: str) -> bool:
    """The form was served to this browser for this link (its token carries the nonce of the
    cookie the page set, and this link's digest), and posted from the app's own origin."""
    settings = settings_of(request)
    cookie, form = _serializers(secret_key(revealed(settings.secret_key), settings.data_dir))
    try:
        nonce: Any = cookie.loads(request.cookies.get(COOKIE, ""), max_age=FORM_SECONDS)
        posted: Any = form.loads(form_token, max_age=FORM_SECONDS)
    except (BadSignature, SignatureExpired):
        return False
    return (
        isinstance(nonce, str)
        and isinstance(posted, dict)
        and hmac.compare_digest(str(posted.get("n", "")), nonce)
        and hmac.compare_digest(str(posted.get("l", "")), _link_digest(token))
        and same_origin(request, settings.public_url)
    )


def _page(
    request: Request, title: str, status: int, claim: LinkClaim | None = None, **context: Any
) -> HTMLResponse:
    page = f"/requests/{claim.request_id}" if claim is not None else "/"
    values = {"title": title, "message": None, "req": None, "confirm": False, "page": page}
    return templates.TemplateResponse(
        request, "email_link.html", values | context, status_code=status
    )


def _desk(engine: Engine) -> LinkDesk | None:
    return engine.notifier.email_links


async def _account(engine: Engine, claim: LinkClaim) -> Principal | None:
    """The link's account as it is now; ``None`` when it is gone or disabled."""
    account = await engine.accounts.user(claim.account)
    if account is None or account.disabled:
        return None
    return Principal.local(account.name, account.groups)


async def _decidable(
    engine: Engine, desk: LinkDesk, claim: LinkClaim, principal: Principal
) -> PendingCall | None:
    """The request, while this account may still decide it; ``None`` otherwise."""
    try:
        found = await engine.visible_request(claim.request_id, principal)
    except (InvalidRequestId, RequestNotFound):
        return None
    return found if desk.rules.may_decide(principal, found) else None


async def _already_used(engine: Engine, claim: LinkClaim, principal: Principal) -> bool:
    """Whether this account already decided (or voted on) the link's request."""
    _, decision = await engine.requests.decision_of(claim.request_id)
    if decision is not None and decision.principal == principal.id:
        return True
    return await engine.requests.vote_of(claim.request_id, principal.person) is not None


def _refused(request: Request, why: str, claim: LinkClaim) -> HTMLResponse:
    titles = {
        "reused": (409, "This link was already used"),
        "expired": (410, "This link has expired"),
        "not pending": (409, "This request is no longer waiting"),
    }
    status, title = titles.get(why, (403, "This link no longer works"))
    return _page(request, title, status, claim, message=f"Nothing was decided ({why}).")


@router.get(LINK_PATH + "/{token}")
async def show(request: Request, token: str, engine: EngineDep) -> HTMLResponse:
    """What the link would decide, and the one button that decides it. Decides nothing."""
    desk = _desk(engine)
    claim = desk.links.read(token) if desk is not None else None
    if desk is None or claim is None or not KIND_RULES[claim.kind].in_email:
        return _page(request, "This link is not valid", 404)
    if claim.expired():
        return _refused(request, "expired", claim)
    principal = await _account(engine, claim)
    found = await _decidable(engine, desk, claim, principal) if principal else None
    if principal is None or found is None:
        return _refused(request, "account disabled or not allowed", claim)
    if found.status is not RequestStatus.PENDING:
        used = await _already_used(engine, claim, principal)
        return _refused(request, "reused" if used else "not pending", claim)
    if await _already_used(engine, claim, principal):
        return _refused(request, "reused", claim)
    settings = settings_of(request)
    cookie, form = _serializers(secret_key(revealed(settings.secret_key), settings.data_dir))
    nonce = secrets.token_urlsafe(24)
    response = _page(
        request,
        f"{claim.kind.value.capitalize()} {found.tool}?",
        200,
        claim,
        req=found,
        confirm=True,
        action=f"{LINK_PATH}/{token}",
        form_token=form.dumps({"n": nonce, "l": _link_digest(token)}),
        decision=claim.kind.value,
        account=claim.account,
        reason_required=engine.settings.require_reject_reason,
    )
    response.set_cookie(
        COOKIE,
        cookie.dumps(nonce),
        max_age=FORM_SECONDS,
        httponly=True,
        samesite="strict",
        secure=settings.public_url.startswith("https://"),
        path=LINK_PATH,
    )
    return response


@router.post(LINK_PATH + "/{token}")
async def confirm(
    request: Request,
    token: str,
    engine: EngineDep,
    form_token: Annotated[str, Form()] = "",
    reason: Annotated[str, Form(max_length=2000)] = "",
) -> HTMLResponse:
    """Decide as the link's account, once, under the web's rules; refusals are audited."""
    desk = _desk(engine)
    claim = desk.links.read(token) if desk is not None else None
    if desk is None or claim is None or not KIND_RULES[claim.kind].in_email:
        return _page(request, "This link is not valid", 404)
    if not _form_ok(request, token, form_token):
        # Not this link's use: a post that did not come from its page decides nothing.
        message = "The form expired or did not come from this site: open the link again."
        return _page(request, "Nothing was decided", 403, claim, message=message)
    principal = await _account(engine, claim)
    why = "expired" if claim.expired() else None
    if why is None and principal is None:
        why = "account disabled"
    outcome: DecisionRecord | Vote | None = None
    if why is None and principal is not None:
        outcome, why = await _decide(engine, claim, principal, reason.strip() or None)
    await desk.audit.record(
        claim.request_id,
        principal=principal.id if principal is not None else f"local:{claim.account}",
        decision=claim.kind.value,
        refused=why,
    )
    if why is not None:
        return _refused(request, why, claim)
    if isinstance(outcome, Vote):
        title = "Approval counted"
        message = (
            f"Counted as {claim.account}'s approval: {outcome.approvals} of the"
            f" {outcome.quorum} needed; it waits for other approvers. The link is now used up."
        )
    else:
        title = {"approve": "Approved", "reject": "Rejected"}.get(claim.kind.value, "Decided")
        message = f"Decided as {claim.account}. The link is now used up."
    return _page(request, title, 200, claim, message=message)


async def _decide(
    engine: Engine, claim: LinkClaim, principal: Principal, reason: str | None
) -> tuple[DecisionRecord | Vote | None, str | None]:
    """Decide through the engine: the decision (or the vote), or why not."""
    try:
        outcome = await engine.decide(
            claim.request_id, KIND_RULES[claim.kind].ruling, principal=principal, reason=reason
        )
    except (RequestNotPending, AlreadyVoted) as exc:
        if await _already_used(engine, claim, principal):
            return None, "reused"
        expired = isinstance(exc, RequestNotPending) and exc.status == "expired"
        return None, "expired" if expired else "not pending"
    except (NotAllowed, RequestNotFound, InvalidRequestId):
        return None, "not allowed"
    except (InvalidDecision, InvalidValue) as exc:
        return None, f"refused: {exc}"[:300]
    return outcome, None
