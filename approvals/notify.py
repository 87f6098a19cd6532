"""Notifications, the pure part: what a notice says, how a webhook body is signed and checked,
and how long to wait before trying again.

A notice never carries the call's arguments: it names the tool, the policy's reason, who may
decide and by when, and links to the request's page, which shows nothing without signing in.

Webhook signatures: ``X-Approvals-Timestamp`` is the unix time of the attempt (seconds) and
``X-Approvals-Signature`` is ``sha256=`` followed by the hex HMAC-SHA256, keyed with the shared
secret, of ``timestamp + "." + body`` (the raw bytes). Receivers check both with
``verify_signature``, which also refuses a timestamp outside its tolerance (a replay).
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Any

TIMESTAMP_HEADER = "X-Approvals-Timestamp"
SIGNATURE_HEADER = "X-Approvals-Signature"
DELIVERY_HEADER = "X-Approvals-Delivery"
SIGNATURE_PREFIX = "sha256="
#: How old (or how far in the future) a signed timestamp may be, by default.
DEFAULT_TOLERANCE_SECONDS = 300.0


class NotificationEvent(enum.StrEnum):
    """Why people are told: a call started waiting, or it was escalated to the next group."""

    WAITING = "waiting"
    ESCALATED = "escalated"


class DeliveryStatus(enum.StrEnum):
    """The outcome of one attempt (and, once final, of its delivery)."""

    SENT = "sent"
    #: Worth trying again later: a 5xx, a timeout, a connection refused.
    RETRY = "retry"
    #: Will not succeed by repeating it: a 4xx, a refused recipient, attempts exhausted.
    FAILED = "failed"
    #: Nothing to send on this channel (no recipient for the request's approver groups).
    SKIPPED = "skipped"


@dataclass(frozen=True, kw_only=True, slots=True)
class Notice:
    """One notification owed: a request at one escalation level, on one channel."""

    delivery_id: int
    channel: str
    event: NotificationEvent
    attempt: int
    request_id: str
    run_id: str
    tool: str
    reason: str | None
    approver_groups: tuple[str, ...]
    escalation_level: int
    expires_at: datetime
    #: ``{public_url}/requests/{id}``: the detail page, behind sign-in.
    link: str

    @classmethod
    def from_row(cls, row: dict[str, Any], *, public_url: str, default_group: str) -> Notice:
        request_id = str(row["request_id"])
        return cls(
            delivery_id=row["id"],
            channel=row["channel"],
            event=NotificationEvent(row["event"]),
            attempt=row["attempts"],
            request_id=request_id,
            run_id=str(row["run_id"]),
            tool=row["tool"],
            reason=row["reason"],
            approver_groups=tuple(row["approvers"] or ()) or (default_group,),
            escalation_level=row["escalation_level"],
            expires_at=row["expires_at"],
            link=request_link(public_url, request_id),
        )

    def to_json(self) -> dict[str, Any]:
        """The webhook body. Deliberately without the arguments."""
        return {
            "event": f"request.{self.event.value}",
            "delivery_id": self.delivery_id,
            "request_id": self.request_id,
            "run_id": self.run_id,
            "tool": self.tool,
            "reason": self.reason,
            "approver_groups": list(self.approver_groups),
            "escalation_level": self.escalation_level,
            "expires_at": self.expires_at.isoformat(),
            "url": self.link,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class RunNotice:
    """One run notification owed on a webhook: the run started waiting or ended."""

    delivery_id: int
    channel: str
    attempt: int
    run_id: str
    thread_id: str
    graph: str
    #: waiting, completed, blocked, failed or cancelled.
    status: str
    #: The approval requests the run waits on (their ids only).
    pending: tuple[str, ...]
    at: datetime
    #: ``{public_url}/api/v1/runs/{id}``: the run's report, behind a bearer token.
    link: str

    @classmethod
    def from_row(cls, row: dict[str, Any], *, public_url: str) -> RunNotice:
        run_id = str(row["run_id"])
        return cls(
            delivery_id=row["id"],
            channel=row["channel"],
            attempt=row["attempts"],
            run_id=run_id,
            thread_id=row["thread_id"],
            graph=row["graph"],
            status=row["status"],
            pending=tuple(row["pending"] or ()),
            at=row["at"],
            link=f"{public_url.rstrip('/')}/api/v1/runs/{run_id}",
        )

    @property
    def delivery_header(self) -> str:
        """``X-Approvals-Delivery``: run deliveries are numbered apart from request ones."""
        return f"run-{self.delivery_id}"

    def to_json(self) -> dict[str, Any]:
        """The webhook body: the run's new status, never its input, answer or error (the run's
        report, behind a token, has them)."""
        return {
            "event": f"run.{self.status}",
            "delivery_id": self.delivery_header,
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "graph": self.graph,
            "status": self.status,
            "pending": list(self.pending),
            "at": self.at.isoformat(),
            "url": self.link,
        }


def run_webhook_body(notice: RunNotice) -> bytes:
    """The exact bytes of a run notification that are signed and sent."""
    return json.dumps(notice.to_json(), sort_keys=True, separators=(",", ":")).encode()


def request_link(public_url: str, request_id: str) -> str:
    return f"{public_url.rstrip('/')}/requests/{request_id}"


def webhook_body(notice: Notice) -> bytes:
    """The exact bytes that are signed and sent (the same on every attempt)."""
    return json.dumps(notice.to_json(), sort_keys=True, separators=(",", ":")).encode()


def _key(secret: str | bytes) -> bytes:
    return secret.encode() if isinstance(secret, str) else secret


def sign(secret: str | bytes, timestamp: str, body: bytes) -> str:
    """``sha256=<hex>`` of HMAC-SHA256(secret, timestamp + "." + body)."""
    digest = hmac.new(_key(secret), timestamp.encode() + b"." + body, hashlib.sha256)
    return SIGNATURE_PREFIX + digest.hexdigest()


def signature_headers(
    secret: str | bytes, body: bytes, *, now: float | None = None
) -> dict[str, str]:
    """The timestamp and signature headers for one attempt."""
    timestamp = str(int(time.time() if now is None else now))
    return {TIMESTAMP_HEADER: timestamp, SIGNATURE_HEADER: sign(secret, timestamp, body)}


def verify_signature(
    secret: str | bytes,
    timestamp: str,
    body: bytes,
    signature: str,
    tolerance: float = DEFAULT_TOLERANCE_SECONDS,
    *,
    now: float | None = None,
) -> bool:
    """For receivers: whether ``signature`` (the ``X-Approvals-Signature`` header) signs
    ``body`` (the raw request bytes) at ``timestamp`` (the ``X-Approvals-Timestamp`` header)
    with ``secret``, and the timestamp is within ``tolerance`` seconds of now.

    Compares in constant time. Refusing old timestamps stops a captured request from being
    replayed later; a receiver that also remembers ``X-Approvals-Delivery`` ids drops repeats
    within the window (a retry after a lost answer repeats a delivery by design)."""
    try:
        sent_at = int(timestamp)
    except ValueError:
        return False
    current = time.time() if now is None else now
    if abs(current - sent_at) > tolerance:
        return False
    # Bytes, not text: compare_digest raises for text that is not ASCII (a header "sha256=é"
    # made a receiver built on this answer 500 instead of refusing it).
    expected = sign(secret, timestamp, body).encode()
    return hmac.compare_digest(expected, signature.encode("utf-8", "surrogatepass"))


def backoff_seconds(attempt: int, *, base: float, cap: float) -> float:
    """The wait after failed attempt number ``attempt`` (1-based): base, 2*base, 4*base, ...
    up to ``cap``."""
    return float(min(cap, base * 2 ** max(0, attempt - 1)))


def _deadline(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _headline(notice: Notice) -> str:
    if notice.event is NotificationEvent.ESCALATED:
        return f"Escalated (level {notice.escalation_level}): {notice.tool} needs approval"
    return f"Waiting: {notice.tool} needs approval"


def _slack_escape(text: str) -> str:
    # Slack's mrkdwn gives &, < and > meaning (links, mentions); the tool and the reason are
    # untrusted text, so they are shown, never interpreted.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_message(notice: Notice) -> dict[str, str]:
    """The body of a Slack-compatible incoming-webhook post."""
    lines = [
        _slack_escape(_headline(notice)),
        f"Reason: {_slack_escape(notice.reason or 'not given')}",
        f"Approvers: {_slack_escape(', '.join(notice.approver_groups))}",
        f"Decide by: {_deadline(notice.expires_at)}",
        f"<{notice.link}|Open the request>",
    ]
    return {"text": "\n".join(lines)}


def email_message(notice: Notice, *, sender: str, recipients: tuple[str, ...]) -> EmailMessage:
    """A plain-text e-mail about a notice."""
    message = EmailMessage()
    # One line: a reason or tool name with a line break cannot add headers.
    subject = " ".join(f"[approvals] {_headline(notice)}".split())
    message["Subject"] = subject
    message["From"] = sender
    message["To"] = ", ".join(recipients)
    message["X-Approvals-Request"] = notice.request_id
    message.set_content(
        "\n".join(
            [
                f"{_headline(notice)}.",
                "",
                f"Tool:      {notice.tool}",
                f"Reason:    {notice.reason or 'not given'}",
                f"Approvers: {', '.join(notice.approver_groups)}",
                f"Decide by: {_deadline(notice.expires_at)}",
                "",
                f"Review it here (sign-in required): {notice.link}",
            ]
        )
    )
    return message
