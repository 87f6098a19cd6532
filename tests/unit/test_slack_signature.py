"""The Slack app's signature check agrees with Slack's own (slack-sdk's ``SignatureVerifier``):
v0, HMAC-SHA256 of ``v0:{timestamp}:{body}`` under the signing secret, the timestamp within
five minutes. And the message it posts shows untrusted text without interpreting it."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st
from slack_sdk.signature import Clock, SignatureVerifier

from approvals.model import PendingCall, RequestStatus
from web.channels.slack_app import signature_ok
from web.channels.slack_blocks import settled_message, waiting_message

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
NOW = 1_700_000_000.0


class Fixed(Clock):
    def now(self) -> float:
        return NOW


def sign(secret: str, timestamp: str, body: bytes) -> str:
    base = f"v0:{timestamp}:".encode() + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


@given(
    body=st.text(max_size=300),
    skew=st.integers(min_value=-400, max_value=400),
    signed_with=st.sampled_from([SECRET, "another-secret-of-32-characters!"]),
    tampered=st.booleans(),
)
def test_our_verdict_is_slack_sdks(body: str, skew: int, signed_with: str, tampered: bool) -> None:
    raw = body.encode()
    timestamp = str(int(NOW) + skew)
    signature = sign(signed_with, timestamp, raw)
    if tampered:
        raw += b"&x=1"
    ours = signature_ok(SECRET, timestamp, raw, signature, now=NOW)
    assert ours == SignatureVerifier(SECRET, Fixed()).is_valid(raw, timestamp, signature)
    assert ours == (signed_with == SECRET and not tampered and abs(skew) <= 300)


def test_a_timestamp_that_is_no_number_or_an_empty_secret_is_refused() -> None:
    for timestamp in ("", "abc", "-5", " 1700000000", "1700000000.5"):
        assert not signature_ok(SECRET, timestamp, b"x", sign(SECRET, timestamp, b"x"), now=NOW)
    timestamp = str(int(NOW))
    assert not signature_ok("", timestamp, b"x", sign("", timestamp, b"x"), now=NOW)
    assert not signature_ok(SECRET, timestamp, b"x", "v0=é", now=NOW)


def request(**changes: object) -> PendingCall:
    now = datetime(2025, 1, 1, 12, tzinfo=UTC)
    values: dict[str, object] = {
        "id": "00000000-0000-0000-0000-000000000001",
        "run_id": "00000000-0000-0000-0000-000000000002",
        "thread_id": "t",
        "call_id": "c",
        "tool": "issue_refund",
        "shown": {"order": "<@U0BOSS> <!channel>", "amount": 120},
        "args_schema": {},
        "identity": "i",
        "reason": "a refund above 100 needs <!here>",
        "interrupt_id": None,
        "state_version": None,
        "requested_by": "local:alice",
        "status": RequestStatus.PENDING,
        "created_at": now,
        "expires_at": now + timedelta(hours=1),
        "decided_at": None,
        "approvers": ("support",),
        "allowed_decisions": ("approve", "edit", "reject", "respond"),
    }
    values.update(changes)
    return PendingCall(**values)  # type: ignore[arg-type]


def test_the_message_offers_the_slack_decisions_and_shows_arguments_as_plain_text() -> None:
    text, blocks = waiting_message(request(), "https://approvals.example.com/requests/1")
    assert text == "Waiting: issue_refund needs approval"
    (actions,) = [b for b in blocks if b["type"] == "actions"]
    ids = [e["action_id"] for e in actions["elements"]]
    # An edit is the web form's (no arguments can be typed in Slack).
    assert ids == ["approvals.approve", "approvals.reject", "approvals.respond", "approvals.open"]
    assert actions["elements"][-1]["text"]["text"] == "Edit on the web"
    shown = [b["text"] for b in blocks if b.get("text", {}).get("type") == "plain_text"]
    assert shown == [
        {"type": "plain_text", "text": json.dumps(request().shown, indent=2, sort_keys=True)}
    ]
    mrkdwn = json.dumps([b for b in blocks if b.get("text", {}).get("type") != "plain_text"])
    assert "<!here>" not in mrkdwn
    assert "&lt;!here&gt;" in mrkdwn


def test_a_quorum_keeps_only_approve_and_reject_and_a_decided_message_keeps_no_button() -> None:
    waiting = request(quorum=2)
    _, blocks = waiting_message(waiting, "https://x/requests/1")
    (actions,) = [b for b in blocks if b["type"] == "actions"]
    ids = [e["action_id"] for e in actions["elements"]]
    assert ids == ["approvals.approve", "approvals.reject", "approvals.open"]
    _, settled = settled_message(waiting, "https://x/requests/1", "done", still_waiting=False)
    (actions,) = [b for b in settled if b["type"] == "actions"]
    assert [e["action_id"] for e in actions["elements"]] == ["approvals.open"]
    assert settled[-1] == {"type": "context", "elements": [{"type": "mrkdwn", "text": "done"}]}
