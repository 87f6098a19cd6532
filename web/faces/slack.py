"""The Slack app's interactions (``POST /integrations/slack/interactions``): an approver decides
with the buttons of the message that told them a call waits (``web.channels.slack_app`` posts
it).

- Nothing is read before Slack's signature is checked: ``X-Slack-Signature`` (v0) over
  ``X-Slack-Request-Timestamp`` and the raw body, the timestamp within five minutes; anything
  else is 401.
- The clicking Slack user (``payload.user.id``) is the local account linked to it
  (``approvals users link NAME --slack UXXXX``), or the OpenID Connect principal whose sign-in
  named it in ``APPROVALS_SLACK_OIDC_CLAIM`` (``_who``). It decides through the engine as that,
  with every rule the web applies: its groups now, separation of duties, quorum, the decisions
  the request offers, expiry.
- Approve decides at once. Reject and respond open a modal (``views.open``) for the reason or
  the answer; its submission (``view_submission``) decides.
- Slack waits three seconds for the answer: the decision is one transaction, and the slow
  calls to Slack (``views.open``, ``chat.update``, ``chat.postEphemeral``) run after the
  answer. A decision updates the message to say who decided what, and when (a request
  decided, or ended, by another route has its messages updated by the notifier:
  ``web.channels.slack_app``). A click that
  decides nothing (the request no longer waits, the user is linked to no account or may not
  decide it) gets an explanation only its clicker sees.
- Every click is audited, whether it decided or not (``slack.decided``, ``slack.asked``: a
  modal was opened, ``slack.refused``: why in its data).
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import httpx
from fastapi import APIRouter, BackgroundTasks, Request
from fastapi.responses import JSONResponse, Response

from approvals.decision_kinds import KIND_RULES, DecisionKind
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
from approvals.notify import request_link
from approvals.principals import Principal, Via
from web.channels.slack_app import SlackDesk, decider, ending, signature_ok
from web.channels.slack_blocks import (
    TEXT_ACTION,
    TEXT_BLOCK,
    action_id,
    escape,
    settled_message,
    slack_kinds,
    text_modal,
)
from web.deps import EngineDep, settings_of
from web.engine import Engine

#: Slack's interactions (the app's Interactivity Request URL).
router = APIRouter(include_in_schema=False)
PATH = "/integrations/slack/interactions"

log = logging.getLogger("approvals.slack")

#: The buttons' decisions by ``action_id``; reject and respond ask for text in a modal first.
ACTIONS = {action_id(r.kind): r.kind for r in KIND_RULES.values() if r.in_slack}
ASK_FIRST = frozenset({DecisionKind.REJECT, DecisionKind.RESPOND})
SLACK_USER = re.compile(r"^[UW][A-Z0-9]{2,30}$")
#: How long the calls to Slack after the answer may take, each.
SLACK_TIMEOUT = 10.0

EXPLAINED = {
    "not linked": "Your Slack user is linked to no approvals account, so nothing was decided."
    " An operator links it: `approvals users link NAME --slack {user}`.",
    "account disabled": "Your approvals account is disabled: nothing was decided.",
    "signed out": "Your approvals sign-in has ended (signed out, expired, or ended by an"
    " operator): sign in to approvals on the web again, then click. Nothing was decided.",
    "not allowed": "You may not decide this request (you are not in the groups it waits for"
    " now, or it was escalated, or you started its run): nothing was decided.",
    "not pending": "This request no longer waits for a decision: nothing was decided.",
    "expired": "This request has expired: nothing was decided.",
    "already voted": "You already approved this request; it waits for other approvers.",
    "not offered": "This request does not offer that decision here: nothing was decided.",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Click:
    """One interaction: a button's click, or the submission of the modal a click opened."""

    kind: DecisionKind
    slack_user: str
    request_id: str
    channel: str | None
    ts: str | None
    trigger_id: str | None = None
    #: The modal's reason or answer (a submission only).
    text: str | None = None
    submitted: bool = False

    @property
    def audited_request(self) -> str | None:
        """The request id, for the audit log: ``None`` when it is none."""
        try:
            return str(uuid.UUID(self.request_id))
        except ValueError:
            return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def parse(body: bytes) -> Click | None:
    """The click a (verified) body carries; ``None`` for an interaction that decides nothing
    (a link button, a closed modal). Raises ``ValueError`` on a malformed one."""
    form = parse_qs(body.decode("utf-8"), keep_blank_values=True)
    payload = json.loads(form["payload"][0]) if "payload" in form else None
    if not isinstance(payload, dict):
        raise ValueError("no payload")
    user = str((payload.get("user") or {}).get("id", ""))
    if not SLACK_USER.match(user):
        raise ValueError("no Slack user")
    if payload.get("type") == "block_actions":
        action = (payload.get("actions") or [{}])[0]
        kind = ACTIONS.get(str(action.get("action_id", "")))
        if kind is None:
            return None
        container = payload.get("container") or {}
        channel = container.get("channel_id") or (payload.get("channel") or {}).get("id")
        return Click(
            kind=kind,
            slack_user=user,
            request_id=str(action.get("value", "")),
            channel=_text(channel),
            ts=_text(container.get("message_ts") or (payload.get("message") or {}).get("ts")),
            trigger_id=_text(payload.get("trigger_id")),
        )
    if payload.get("type") == "view_submission":
        view = payload.get("view") or {}
        kind = ACTIONS.get(str(view.get("callback_id", "")))
        if kind is None:
            return None
        meta = json.loads(view.get("private_metadata") or "{}")
        values = ((view.get("state") or {}).get("values") or {}).get(TEXT_BLOCK) or {}
        return Click(
            kind=kind,
            slack_user=user,
            request_id=str(meta.get("r", "")),
            channel=_text(meta.get("c")),
            ts=_text(meta.get("t")),
            text=_text((values.get(TEXT_ACTION) or {}).get("value")),
            submitted=True,
        )
    return None


async def _who(engine: Engine, desk: SlackDesk, slack_user: str) -> Principal | None:
    """The enabled local account ``slack_user`` is linked to, as it is now; else, where
    ``APPROVALS_SLACK_OIDC_CLAIM`` is set, the OpenID Connect principal a sign-in linked it to,
    with the name and groups of its newest live web session. The provider tells us its groups
    only at a sign-in, so a click holds what a web page of that person would hold now, and
    nothing once it has signed out or its sessions were ended or expired."""
    name = await desk.links.account_of(slack_user)
    if name is not None:
        account = await engine.accounts.user(name)
        if account is None or account.disabled:
            return None
        return Principal.local(account.name, account.groups)
    if not desk.oidc_links:
        return None
    found = await desk.links.oidc_principal_of(slack_user)
    if found is None or found[1] is None:
        return None
    principal, shown, groups = found
    return Principal(id=principal, name=shown, via=Via.OIDC, groups=groups)


async def _askable(
    engine: Engine, click: Click, principal: Principal
) -> tuple[PendingCall | None, str | None]:
    """The request, when ``principal`` may make the click's decision now (before its modal
    asks for text); else why not."""
    try:
        found = await engine.visible_request(click.request_id, principal)
    except (InvalidRequestId, RequestNotFound):
        return None, "not allowed"
    if found.status is RequestStatus.EXPIRED:
        return None, "expired"
    if found.status is not RequestStatus.PENDING:
        return None, "not pending"
    if not engine.rules.may_decide(principal, found):
        return None, "not allowed"
    if click.kind not in slack_kinds(found):
        return None, "not offered"
    return found, None


async def _decide(
    engine: Engine, click: Click, principal: Principal
) -> tuple[DecisionRecord | Vote | None, str | None]:
    """Decide through the engine: the decision (or the vote), or why not."""
    rules = KIND_RULES[click.kind]
    text = click.text.strip() if click.text else None
    try:
        outcome = await engine.decide(
            click.request_id,
            rules.ruling,
            principal=principal,
            reason=None if rules.takes_message else text or None,
            message=text if rules.takes_message else None,
        )
    except RequestNotPending as exc:
        return None, "expired" if exc.status == RequestStatus.EXPIRED else "not pending"
    except AlreadyVoted:
        return None, "already voted"
    except (NotAllowed, RequestNotFound, InvalidRequestId):
        return None, "not allowed"
    except (InvalidDecision, InvalidValue) as exc:
        return None, f"refused: {exc}"[:300]
    return outcome, None


@router.post(PATH)
async def interactions(request: Request, engine: EngineDep, later: BackgroundTasks) -> Response:
    """A click on a message's button, or a modal's submission (this module's docstring)."""
    desk = SlackDesk.on(engine.adapters.db, settings_of(request))
    if desk.signing_secret is None:
        return JSONResponse({"error": "the Slack app is not configured"}, status_code=404)
    body = await request.body()
    timestamp = request.headers.get("x-slack-request-timestamp", "")
    signature = request.headers.get("x-slack-signature", "")
    if not signature_ok(desk.signing_secret, timestamp, body, signature):
        return JSONResponse({"error": "not signed by Slack"}, status_code=401)
    try:
        click = parse(body)
    except (ValueError, UnicodeDecodeError, AttributeError, TypeError, KeyError, IndexError):
        return JSONResponse({"error": "not a Slack interaction"}, status_code=400)
    if click is None:
        return Response(status_code=200)
    principal = await _who(engine, desk, click.slack_user)
    why = None if principal is not None else await _unlinked_why(desk, click)
    if principal is not None and click.kind in ASK_FIRST and not click.submitted:
        found, why = await _askable(engine, click, principal)
        if found is not None:
            await _audit(desk, click, principal, asked=True)
            later.add_task(_open_modal, desk, engine, click, found)
            return Response(status_code=200)
    outcome: DecisionRecord | Vote | None = None
    if why is None and principal is not None:
        outcome, why = await _decide(engine, click, principal)
    await _audit(desk, click, principal, refused=why)
    if why is not None and why.startswith("refused:") and click.submitted:
        # Shown in the modal, under its text, which stays open to be corrected.
        errors = {TEXT_BLOCK: why.removeprefix("refused: ")[:150]}
        return JSONResponse({"response_action": "errors", "errors": errors})
    later.add_task(_tell, desk, engine, click, outcome, why)
    return Response(status_code=200)


async def _unlinked_why(desk: SlackDesk, click: Click) -> str:
    linked = await desk.links.account_of(click.slack_user)
    if linked is not None:
        return "account disabled"
    if desk.oidc_links and await desk.links.oidc_principal_of(click.slack_user) is not None:
        return "signed out"
    return "not linked"


async def _audit(
    desk: SlackDesk,
    click: Click,
    principal: Principal | None,
    *,
    asked: bool = False,
    refused: str | None = None,
) -> None:
    await desk.links.record(
        click.audited_request,
        principal=principal.id if principal is not None else f"slack:{click.slack_user}",
        slack_user=click.slack_user,
        decision=click.kind.value,
        asked=asked,
        refused=refused,
    )


async def _call(desk: SlackDesk, method: str, body: dict[str, Any]) -> bool:
    """One Web API call after the answer; a failure is logged (the click's outcome stands)."""
    if desk.api is None:
        log.warning("Slack %s not called: no bot token (APPROVALS_SLACK_BOT_TOKEN)", method)
        return False
    async with httpx.AsyncClient(timeout=SLACK_TIMEOUT, follow_redirects=False) as client:
        answer = await desk.api.call(client, method, body)
    if not answer.ok:
        log.warning("Slack %s failed: %s", method, answer.outcome.error)
    return answer.ok


async def _open_modal(desk: SlackDesk, engine: Engine, click: Click, found: PendingCall) -> None:
    metadata = json.dumps({"r": found.id, "c": click.channel, "t": click.ts})
    required = engine.settings.require_reject_reason and click.kind is DecisionKind.REJECT
    view = text_modal(click.kind, found, metadata, required=required)
    await _call(desk, "views.open", {"trigger_id": click.trigger_id, "view": view})


async def _update(desk: SlackDesk, engine: Engine, click: Click, vote: Vote | None) -> None:
    """Show on the clicked message where its request stands: a vote counted (the buttons
    stay), or how it ended."""
    current = await engine.requests.get(click.request_id)
    if current is None or not click.channel or not click.ts:
        return
    if vote is not None:
        who = await decider(desk.links, vote.principal)
        line = f"{who} approved: {vote.approvals} of the {vote.quorum} approvals needed"
    elif current.status is RequestStatus.PENDING:
        return
    else:
        line = await ending(desk.links, engine.requests, current)
    link = request_link(desk.public_url, current.id)
    text, blocks = settled_message(current, link, line, still_waiting=vote is not None)
    body = {"channel": click.channel, "ts": click.ts, "text": text, "blocks": blocks}
    if await _call(desk, "chat.update", body) and vote is None:
        # The notifier owes this message no update of its own (its others it still does).
        await desk.messages.settled(click.channel, click.ts)


async def _tell(
    desk: SlackDesk,
    engine: Engine,
    click: Click,
    outcome: DecisionRecord | Vote | None,
    why: str | None,
) -> None:
    """After the answer: update the message with the decision, or explain to the clicker
    alone why nothing was decided (and show how its request ended on a message that still
    offers buttons)."""
    if why is not None and click.channel:
        known = EXPLAINED.get(why)
        explained = (
            known.format(user=click.slack_user)
            if known is not None
            else f"Nothing was decided ({escape(why)})."
        )
        body = {"channel": click.channel, "user": click.slack_user, "text": explained}
        await _call(desk, "chat.postEphemeral", body)
    if click.audited_request is not None:
        await _update(desk, engine, click, outcome if isinstance(outcome, Vote) else None)
