"""Slack, as an app: a waiting call is posted with its bot token (``chat.postMessage``) to the
channel of its approver group, with a button per decision it offers there
(``web.channels.slack_blocks``); a click comes back, signed, to ``web.faces.slack``, which
decides as the Slack user's linked account (``approvals users link NAME --slack UXXXX``).

- ``SlackApi``: Slack's Web API (``APPROVALS_SLACK_API_URL``), a method and a JSON body.
- ``SlackAppChannel``: the channel the notifier feeds, so posting has the notification queue's
  retries, backoff and leases, and never blocks a run. It records each message it posts
  (``storage.slack_messages``), and once the request no longer waits for it, by whatever
  route (a click, the web, the API, the CLI, an e-mail link, expiry, escalation, a cancelled
  run), the notifier has it update the message (``chat.update``) with the same retries.
- ``signature_ok``: Slack's request signature (v0), checked before anything is read.
- ``SlackDesk``: what the face needs: the API, the links and the audit of clicks.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from approvals.model import DecisionRecord, PendingCall
from approvals.notify import DeliveryStatus, Notice, request_link
from approvals.states import RequestStatus
from storage.db import Database
from storage.requests import PgApprovalRequests
from storage.slack import PgSlack
from storage.slack_messages import FAILED, RETRY, SKIPPED, UPDATED, OwedUpdate, PgSlackMessages
from web.channels.channel import Outcome, http_outcome
from web.channels.slack_blocks import (
    ending_line,
    escalated_line,
    escape,
    settled_message,
    waiting_message,
)
from web.settings import Settings

log = logging.getLogger("approvals.slack")

#: How far a request's ``X-Slack-Request-Timestamp`` may be from our clock (Slack's advice).
MAX_SKEW_SECONDS = 300
#: Slack's answers (``{"ok": false, "error": ...}``, HTTP 200) that say "later", not "never".
RETRYABLE_ERRORS = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)


def signature_ok(
    secret: str, timestamp: str, body: bytes, signature: str, *, now: float | None = None
) -> bool:
    """Whether ``signature`` (``X-Slack-Signature``) is Slack's v0 signature of ``body`` at
    ``timestamp`` (``X-Slack-Request-Timestamp``) under the app's signing secret, and the
    timestamp is within five minutes of ``now``: ``v0=`` and the hex HMAC-SHA256 of
    ``v0:{timestamp}:{body}``, compared in constant time."""
    if not timestamp.isdigit() or not secret:
        return False
    at = time.time() if now is None else now
    if abs(at - int(timestamp)) > MAX_SKEW_SECONDS:
        return False
    base = b"v0:" + timestamp.encode() + b":" + body
    expected = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace"))


@dataclass(frozen=True, kw_only=True, slots=True)
class Answer:
    """What one Web API call came to: its outcome, and Slack's answer when it gave one."""

    outcome: Outcome
    data: dict[str, Any]

    @property
    def ok(self) -> bool:
        return self.outcome.status is DeliveryStatus.SENT


@dataclass(frozen=True, kw_only=True, slots=True)
class SlackApi:
    """Slack's Web API at ``url`` (``https://slack.com/api/``), called with the bot token."""

    url: str
    token: str

    async def call(self, client: httpx.AsyncClient, method: str, body: dict[str, Any]) -> Answer:
        """POST ``body`` (JSON) to ``method`` (``chat.postMessage``). Slack answers HTTP 200
        with ``ok``; a rate limit, Slack's own failure, a timeout or a dropped connection is
        worth a retry, any other refusal is not."""
        url = self.url.rstrip("/") + "/" + method
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Content-Type": "application/json; charset=utf-8",
        }
        try:
            response = await client.post(url, json=body, headers=headers)
        except httpx.TimeoutException as exc:
            error = f"{method}: timeout: {type(exc).__name__}"
            return Answer(outcome=Outcome(DeliveryStatus.RETRY, error=error), data={})
        except httpx.TransportError as exc:
            error = f"{method}: {type(exc).__name__}: {exc}"[:300]
            return Answer(outcome=Outcome(DeliveryStatus.RETRY, error=error), data={})
        outcome = http_outcome(response)
        if outcome.status is not DeliveryStatus.SENT:
            return Answer(outcome=outcome, data={})
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            error = f"{method}: the answer is no JSON object"
            return Answer(outcome=Outcome(DeliveryStatus.RETRY, 200, error), data={})
        if data.get("ok") is True:
            return Answer(outcome=outcome, data=data)
        error = str(data.get("error", "not ok"))[:200]
        status = DeliveryStatus.RETRY if error in RETRYABLE_ERRORS else DeliveryStatus.FAILED
        return Answer(outcome=Outcome(status, 200, f"{method}: {error}"), data=data)


class SlackRequests(Protocol):
    """The requests, and their decisions, as the channel reads them."""

    async def get(self, request_id: str) -> PendingCall | None: ...

    async def decision_of(self, request_id: str) -> tuple[str, DecisionRecord | None]: ...


async def decider(links: PgSlack, principal: str) -> str:
    """How a message names who decided: the Slack user linked to the local account, and the
    account; an OpenID Connect principal by its linked Slack user; any other principal by its
    id."""
    account = principal.removeprefix("local:") if principal.startswith("local:") else None
    slack_user = await links.slack_user_of(account) if account is not None else None
    if account is not None and slack_user is not None:
        return f"<@{slack_user}> ({escape(account)})"
    if principal.startswith("oidc:"):
        # Linked through the sign-in's claim: the Slack user is the person's own name.
        oidc_user = await links.oidc_slack_user_of(principal)
        if oidc_user is not None:
            return f"<@{oidc_user}>"
    return escape(account or principal)


async def ending(links: PgSlack, requests: SlackRequests, request: PendingCall) -> str:
    """The line of a request that no longer waits (``slack_blocks.ending_line``)."""
    _, decision = await requests.decision_of(request.id)
    who = await decider(links, decision.principal) if decision is not None else ""
    return ending_line(request, decision, who)


class SlackAppChannel:
    """Posts a waiting call's message, with its buttons, to the channel of each of its
    approver groups that has one, else to the default channel; records each message posted,
    and updates it once its request no longer waits for it (``claim_updates``, ``update``,
    ``record_update``: the notifier runs them beside the posts, with their retries)."""

    name = "slack_app"

    def __init__(
        self,
        api: SlackApi,
        *,
        requests: SlackRequests,
        messages: PgSlackMessages,
        links: PgSlack,
        public_url: str,
        channel: str | None = None,
        group_channels: Mapping[str, str] | None = None,
    ) -> None:
        self._api = api
        self._requests = requests
        self._messages = messages
        self._links = links
        self._public_url = public_url
        self._channel = channel
        self._group_channels = dict(group_channels or {})

    def channels(self, groups: Sequence[str]) -> tuple[str, ...]:
        """The channels of the request's approver groups, or the default one."""
        chosen = [self._group_channels[g] for g in groups if g in self._group_channels]
        if not chosen and self._channel:
            chosen = [self._channel]
        return tuple(dict.fromkeys(chosen))

    async def send(self, notice: Notice, client: httpx.AsyncClient) -> Outcome:
        request = await self._requests.get(notice.request_id)
        if request is None or request.status is not RequestStatus.PENDING:
            return Outcome(DeliveryStatus.SKIPPED, error="the request no longer waits")
        targets = self.channels(notice.approver_groups)
        if not targets:
            groups = ", ".join(notice.approver_groups)
            return Outcome(DeliveryStatus.SKIPPED, error=f"no Slack channel for groups {groups}")
        level = notice.escalation_level
        # A retry after a failure posts only where the last attempt did not.
        done = await self._messages.posted_targets(request.id, level)
        text, blocks = waiting_message(request, notice.link)
        for target in targets:
            if target in done:
                continue
            body = {"channel": target, "text": text, "blocks": blocks, "unfurl_links": False}
            answer = await self._api.call(client, "chat.postMessage", body)
            if not answer.ok:
                return answer.outcome
            channel, ts = answer.data.get("channel"), answer.data.get("ts")
            log.info("request %s posted to Slack channel %s (ts %s)", request.id, channel, ts)
            if isinstance(ts, str) and ts:
                await self._messages.posted(
                    request.id,
                    escalation_level=level,
                    target=target,
                    channel=channel if isinstance(channel, str) and channel else target,
                    ts=ts,
                )
        return Outcome(DeliveryStatus.SENT, 200)

    async def claim_updates(self, *, limit: int, lease_seconds: float) -> list[OwedUpdate]:
        """The messages owed an update now: their request no longer waits for them."""
        return await self._messages.claim(limit=limit, lease_seconds=lease_seconds)

    async def update(self, owed: OwedUpdate, client: httpx.AsyncClient) -> Outcome:
        """Update a message to say how its request ended (or that it was escalated past the
        message's approvers), its decision buttons removed; the link to its page stays."""
        request = await self._requests.get(owed.request_id)
        if request is None:
            return Outcome(DeliveryStatus.SKIPPED, error="the request is gone")
        if request.status is RequestStatus.PENDING:
            if request.escalation_level <= owed.escalation_level:
                return Outcome(DeliveryStatus.SKIPPED, error="the request still waits")
            line = escalated_line(request)
        else:
            line = await ending(self._links, self._requests, request)
        link = request_link(self._public_url, request.id)
        text, blocks = settled_message(request, link, line, still_waiting=False)
        body = {"channel": owed.channel, "ts": owed.ts, "text": text, "blocks": blocks}
        return (await self._api.call(client, "chat.update", body)).outcome

    async def record_update(self, owed: OwedUpdate, outcome: Outcome, retry_in: float) -> bool:
        """Settle an attempt of ``update``; ``False`` when its lease had lapsed."""
        status = {
            DeliveryStatus.SENT: UPDATED,
            DeliveryStatus.RETRY: RETRY,
            DeliveryStatus.SKIPPED: SKIPPED,
        }.get(outcome.status, FAILED)
        return await self._messages.record(owed, status, error=outcome.error, retry_in=retry_in)


def slack_api(settings: Settings) -> SlackApi | None:
    """The Web API with the configured bot token; ``None`` without one."""
    if settings.slack_bot_token is None:
        return None
    return SlackApi(url=settings.slack_api_url, token=settings.slack_bot_token.get_secret_value())


def slack_channel(settings: Settings, db: Database | None) -> SlackAppChannel | None:
    """The channel the settings configure (a bot token and a channel, default or a group's),
    reading requests and recording its messages in ``db``; ``None`` when not configured, or
    without a database."""
    api = slack_api(settings)
    if api is None or db is None:
        return None
    if not settings.slack_channel and not settings.slack_group_channels:
        return None
    return SlackAppChannel(
        api,
        requests=PgApprovalRequests(db),
        messages=PgSlackMessages(db),
        links=PgSlack(db),
        public_url=settings.public_url,
        channel=settings.slack_channel,
        group_channels=settings.slack_group_channels,
    )


@dataclass(frozen=True, kw_only=True)
class SlackDesk:
    """What ``web.faces.slack`` and ``approvals users link`` need: the Web API (``None``
    without a bot token), the app's signing secret, the links of Slack users to local
    accounts and the audit of clicks (``PgSlack``), and the public URL requests' pages are
    at."""

    api: SlackApi | None
    signing_secret: str | None
    links: PgSlack
    messages: PgSlackMessages
    public_url: str
    #: Whether Slack users linked through an OpenID Connect claim decide (the setting is on).
    oidc_links: bool = False

    @classmethod
    def on(cls, db: Database, settings: Settings) -> SlackDesk:
        secret = settings.slack_signing_secret
        return cls(
            api=slack_api(settings),
            signing_secret=secret.get_secret_value() if secret is not None else None,
            links=PgSlack(db),
            messages=PgSlackMessages(db),
            public_url=settings.public_url,
            oidc_links=settings.slack_oidc_claim is not None,
        )
