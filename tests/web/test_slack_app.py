"""The Slack app, end to end: the notifier posts a waiting refund, with its buttons, to a
stand-in of Slack's Web API on loopback (recording every call), and the app, served over TCP on
PostgreSQL, answers clicks signed the way Slack signs them. The linked approver's click decides
once, as that account, under the web's rules; a forged signature, a stale timestamp, an
unlinked user, another group's user and the run's starter decide nothing; reject asks for its
reason in a modal; the message is updated; every click is audited."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode

import httpx
import pytest
from pydantic import SecretStr
from slack_sdk.signature import SignatureVerifier

from approvals.model import RequestStatus
from approvals.principals import Principal
from tests.integration.helpers import scalar, start_refund, verified
from tests.web.slack_stand_in import Call, StandIn, slack_stand_in
from web.channels.slack_app import SlackDesk
from web.engine import Engine, open_engine
from web.notifier import Notifier
from web.serving import bind, serving, url_of
from web.settings import Settings

PASSWORD = "a-long-enough-password"
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TOKEN = "xoxb-test-bot-token"
SUPPORT_CHANNEL = "C0SUPPORT"
PATH = "/integrations/slack/interactions"
ASK = {"message": "ask may I refund order 1001?"}


@dataclass
class Served:
    url: str
    slack: StandIn
    notifier: Notifier
    desk: SlackDesk
    client: httpx.AsyncClient

    async def post(self, body: bytes, **signing: Any) -> httpx.Response:
        return await self.client.post(PATH, content=body, headers=signed(body, **signing))


@asynccontextmanager
async def served(engine: Engine, settings: Settings) -> AsyncIterator[Served]:
    """The app on TCP, and the notifier, talking to the stand-in as the Slack app."""
    sock = bind("127.0.0.1", 0)
    url = url_of(sock)
    with slack_stand_in() as slack:
        configured = settings.model_copy(
            update={
                "public_url": url,
                "slack_bot_token": SecretStr(TOKEN),
                "slack_signing_secret": SecretStr(SECRET),
                "slack_channel": "C0DEFAULT",
                "slack_group_channels": {"support": SUPPORT_CHANNEL},
                "slack_api_url": slack.url,
            }
        )
        notifier = Notifier.from_settings(
            engine.notifications, configured, engine.run_events, db=engine.adapters.db
        )
        desk = SlackDesk.on(engine.adapters.db, configured)
        try:
            async with (
                serving(configured, sock, engine=engine),
                httpx.AsyncClient(base_url=url, timeout=30) as client,
            ):
                yield Served(url, slack, notifier, desk, client)
        finally:
            sock.close()


def signed(
    body: bytes, *, secret: str = SECRET, at: float | None = None, tamper: bool = False
) -> dict[str, str]:
    """Slack's headers for ``body``: v0, HMAC-SHA256 of ``v0:{timestamp}:{body}``."""
    timestamp = str(int(time.time() if at is None else at))
    base = f"v0:{timestamp}:".encode() + body
    signature = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    if secret == SECRET and at is None:
        # Slack's own verifier agrees: the test signs as Slack does.
        assert SignatureVerifier(SECRET).is_valid(body, timestamp, signature)
    if tamper:
        signature = signature[:-1] + ("0" if signature[-1] != "0" else "1")
    return {
        "content-type": "application/x-www-form-urlencoded",
        "x-slack-request-timestamp": timestamp,
        "x-slack-signature": signature,
    }


def form(payload: dict[str, Any]) -> bytes:
    return urlencode({"payload": json.dumps(payload)}).encode()


def click(message: Call, posted_ts: str, action: str, user: str) -> bytes:
    """The ``block_actions`` payload Slack sends when ``user`` clicks ``action`` on the posted
    ``message`` (its button's action_id and value, as posted)."""
    (actions,) = [b for b in message.body["blocks"] if b["type"] == "actions"]
    (button,) = [e for e in actions["elements"] if e["action_id"] == action]
    channel = message.body["channel"]
    return form(
        {
            "type": "block_actions",
            "user": {"id": user, "username": user.lower(), "team_id": "T0TEAM"},
            "api_app_id": "A0APP",
            "team": {"id": "T0TEAM", "domain": "example"},
            "container": {"type": "message", "message_ts": posted_ts, "channel_id": channel},
            "channel": {"id": channel, "name": "support"},
            "message": {"ts": posted_ts, "text": message.body["text"]},
            "trigger_id": f"1337.{user}.{time.monotonic_ns()}",
            "response_url": "https://hooks.slack.com/actions/T0TEAM/1/x",
            "actions": [
                {
                    "type": "button",
                    "action_id": button["action_id"],
                    "block_id": actions["block_id"],
                    # A link button has none.
                    "value": button.get("value", ""),
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }
    )


def submission(modal: Call, user: str, text: str) -> bytes:
    """The ``view_submission`` payload of the modal ``views.open`` opened, with ``text``."""
    view = modal.body["view"]
    (asked,) = [b for b in view["blocks"] if b["type"] == "input"]
    value = {asked["element"]["action_id"]: {"type": "plain_text_input", "value": text}}
    return form(
        {
            "type": "view_submission",
            "user": {"id": user, "username": user.lower(), "team_id": "T0TEAM"},
            "team": {"id": "T0TEAM"},
            "view": {
                "id": "V0VIEW",
                "type": "modal",
                "callback_id": view["callback_id"],
                "private_metadata": view["private_metadata"],
                "state": {"values": {asked["block_id"]: value}},
            },
        }
    )


async def accounts(engine: Engine, app: Served) -> None:
    # alice starts the refunds: she is in support, but never decides her own.
    for name, groups in [
        ("alice", ["support"]),
        ("bob", ["support"]),
        ("carol", ["support"]),
        ("dave", ["finance"]),
    ]:
        await engine.accounts.add_user(name, PASSWORD, groups)
        linked = await app.desk.links.link(name, f"U0{name.upper()}", by="cli:test")
        assert linked.linked


async def waiting_refund(engine: Engine, app: Served) -> tuple[str, str, Call, str]:
    """A refund waiting for support, posted to Slack: its run, its request, the posted
    message and its ts."""
    outcome = await start_refund(engine, principal="local:alice")
    assert await app.notifier.run_once() == 1
    (posted,) = app.slack.of("chat.postMessage")
    return outcome.run_id, outcome.pending[0], posted, "1700000000.000001"


async def status_of(engine: Engine, request_id: str) -> RequestStatus:
    request = await engine.requests.get(request_id)
    assert request is not None
    return request.status


async def audited(engine: Engine, request_id: str) -> list[tuple[str, str | None, str]]:
    rows = await scalar(
        engine,
        "SELECT coalesce(json_agg(json_build_array(kind, data->>'refused', principal)"
        " ORDER BY id), '[]') FROM audit_events"
        " WHERE request_id = %s AND kind LIKE 'slack.%%'",
        request_id,
    )
    return [tuple(r) for r in rows]


async def test_a_waiting_refund_is_posted_to_its_groups_channel_with_buttons(
    engine: Engine, settings: Settings
) -> None:
    async with served(engine, settings) as app:
        await accounts(engine, app)
        _, request_id, posted, _ = await waiting_refund(engine, app)

    assert posted.authorization == f"Bearer {TOKEN}"
    assert posted.body["channel"] == SUPPORT_CHANNEL
    (actions,) = [b for b in posted.body["blocks"] if b["type"] == "actions"]
    buttons = {e["action_id"]: e for e in actions["elements"]}
    assert {"approvals.approve", "approvals.reject"} <= set(buttons)
    assert "approvals.edit" not in buttons  # no arguments can be typed in Slack
    assert buttons["approvals.approve"]["value"] == request_id
    assert buttons["approvals.reject"]["value"] == request_id
    assert buttons["approvals.open"]["url"] == f"{app.url}/requests/{request_id}"
    request = await engine.requests.get(request_id)
    assert request is not None
    text = json.dumps(posted.body["blocks"])
    assert "issue_refund" in text
    # The shown copy (what the request's page shows), as plain text.
    shown = json.dumps(request.shown, indent=2, sort_keys=True, ensure_ascii=False)
    assert {"type": "plain_text", "text": shown} in [
        b.get("text") for b in posted.body["blocks"] if b["type"] == "section"
    ]
    assert request.reason is not None
    assert json.dumps(request.reason)[1:-1] in text


async def test_the_linked_approvers_click_approves_once_and_updates_the_message(
    engine: Engine, settings: Settings
) -> None:
    async with served(engine, settings) as app:
        await accounts(engine, app)
        run_id, request_id, posted, ts = await waiting_refund(engine, app)
        body = click(posted, ts, "approvals.approve", "U0BOB")
        answers = await asyncio.gather(*(app.post(body) for _ in range(3)))
        assert [a.status_code for a in answers] == [200, 200, 200]
        assert await status_of(engine, request_id) is RequestStatus.APPROVED
        ephemerals = await app.slack.wait_for("chat.postEphemeral", 2)
        # Each click shows where the request stands, in the same words whichever comes last.
        updates = await app.slack.wait_for("chat.update", 3)

    _, decision = await engine.requests.decision_of(request_id)
    assert decision is not None
    assert decision.principal == "local:bob"
    assert {(u.body["channel"], u.body["ts"]) for u in updates} == {(SUPPORT_CHANNEL, ts)}
    assert len({json.dumps(u.body) for u in updates}) == 1
    line = updates[0].body["blocks"][-1]["elements"][0]["text"]
    assert line.startswith("Approved by <@U0BOB> (bob) at ")
    assert not [b for b in updates[0].body["blocks"] if "approvals.approve" in json.dumps(b)]
    assert {e.body["user"] for e in ephemerals} == {"U0BOB"}
    assert all("no longer waits" in e.body["text"] for e in ephemerals)
    assert await audited(engine, request_id) == [
        ("slack.decided", None, "local:bob"),
        ("slack.refused", "not pending", "local:bob"),
        ("slack.refused", "not pending", "local:bob"),
    ]
    # Three clicks, one decision, one execution.
    assert await engine.worker.drain() == 1
    count = "select count(*) from demo_side_effects where run_id = %s"
    assert await scalar(engine, count, run_id) == 1
    await verified(engine)


@pytest.mark.parametrize("forgery", ["another secret", "tampered", "stale", "future", "unsigned"])
async def test_a_forged_or_stale_signature_is_401_and_decides_nothing(
    engine: Engine, settings: Settings, forgery: str
) -> None:
    async with served(engine, settings) as app:
        await accounts(engine, app)
        _, request_id, posted, ts = await waiting_refund(engine, app)
        body = click(posted, ts, "approvals.approve", "U0BOB")
        if forgery == "unsigned":
            answer = await app.client.post(PATH, content=body)
        else:
            ways: dict[str, dict[str, Any]] = {
                "another secret": {"secret": "f" * 32},
                "tampered": {"tamper": True},
                "stale": {"at": time.time() - 310},
                "future": {"at": time.time() + 310},
            }
            answer = await app.post(body, **ways[forgery])
        assert answer.status_code == 401
        await asyncio.sleep(0.2)
        assert [c.method for c in app.slack.calls] == ["chat.postMessage"]
    assert await status_of(engine, request_id) is RequestStatus.PENDING
    assert await audited(engine, request_id) == []


@pytest.mark.parametrize(
    ("user", "why", "principal"),
    [
        ("U0NOBODY", "not linked", "slack:U0NOBODY"),
        ("U0DAVE", "not allowed", "local:dave"),  # finance: another group
        ("U0ALICE", "not allowed", "local:alice"),  # started the run
        ("U0ERIN", "account disabled", "slack:U0ERIN"),
    ],
)
async def test_an_unlinked_user_or_one_not_allowed_decides_nothing_and_is_told_so(
    engine: Engine, settings: Settings, user: str, why: str, principal: str
) -> None:
    async with served(engine, settings) as app:
        await accounts(engine, app)
        await engine.accounts.add_user("erin", PASSWORD, ["support"])
        assert (await app.desk.links.link("erin", "U0ERIN", by="cli:test")).linked
        await engine.accounts.disable_user("erin")
        _, request_id, posted, ts = await waiting_refund(engine, app)
        for action in ("approvals.approve", "approvals.reject"):
            answer = await app.post(click(posted, ts, action, user))
            assert answer.status_code == 200
        ephemerals = await app.slack.wait_for("chat.postEphemeral", 2)
        assert app.slack.of("views.open") == []
        assert app.slack.of("chat.update") == []
    assert await status_of(engine, request_id) is RequestStatus.PENDING
    assert {(e.body["user"], e.body["channel"]) for e in ephemerals} == {(user, SUPPORT_CHANNEL)}
    assert "nothing was decided" in ephemerals[0].body["text"]
    assert await audited(engine, request_id) == [("slack.refused", why, principal)] * 2


async def test_reject_asks_for_its_reason_in_a_modal_and_records_it(
    engine: Engine, settings: Settings
) -> None:
    async with served(engine, settings) as app:
        await accounts(engine, app)
        _, request_id, posted, ts = await waiting_refund(engine, app)
        body = click(posted, ts, "approvals.reject", "U0CAROL")
        assert (await app.post(body)).status_code == 200
        (opened,) = await app.slack.wait_for("views.open")
        trigger = json.loads(parse_qs(body.decode())["payload"][0])["trigger_id"]
        assert opened.body["trigger_id"] == trigger
        assert opened.body["view"]["callback_id"] == "approvals.reject"
        # The click asked; nothing is decided until the modal is submitted.
        assert await status_of(engine, request_id) is RequestStatus.PENDING

        reason = "the order was never paid <@U0BOB>"
        submitted = await app.post(submission(opened, "U0CAROL", reason))
        assert submitted.status_code == 200
        assert submitted.content == b""  # closes the modal
        assert await status_of(engine, request_id) is RequestStatus.REJECTED
        (update,) = await app.slack.wait_for("chat.update")

    _, decision = await engine.requests.decision_of(request_id)
    assert decision is not None
    assert (decision.principal, decision.reason) == ("local:carol", reason)
    assert (update.body["channel"], update.body["ts"]) == (SUPPORT_CHANNEL, ts)
    line = update.body["blocks"][-1]["elements"][0]["text"]
    assert line.startswith("Rejected by <@U0CAROL> (carol) at ")
    # The reason is shown, never interpreted: it mentions no one.
    assert line.endswith(": the order was never paid &lt;@U0BOB&gt;")
    assert await audited(engine, request_id) == [
        ("slack.asked", None, "local:carol"),
        ("slack.decided", None, "local:carol"),
    ]


async def test_a_click_on_a_request_decided_on_the_web_says_who_decided_it(
    engine: Engine, settings: Settings
) -> None:
    async with served(engine, settings) as app:
        await accounts(engine, app)
        _, request_id, posted, ts = await waiting_refund(engine, app)
        bob = Principal.local("bob", frozenset({"support"}))
        await engine.decide(request_id, "reject", principal=bob, reason="a duplicate")
        answer = await app.post(click(posted, ts, "approvals.approve", "U0CAROL"))
        assert answer.status_code == 200
        (ephemeral,) = await app.slack.wait_for("chat.postEphemeral")
        (update,) = await app.slack.wait_for("chat.update")
    assert ephemeral.body["user"] == "U0CAROL"
    line = update.body["blocks"][-1]["elements"][0]["text"]
    assert line.startswith("Rejected by <@U0BOB> (bob) at ")
    assert line.endswith(": a duplicate")
    assert await audited(engine, request_id) == [("slack.refused", "not pending", "local:carol")]


async def test_respond_asks_for_the_answer_in_a_modal_and_the_model_gets_it(
    database_url: str, settings: Settings
) -> None:
    configured = settings.model_copy(
        update={"graphs": {"lc_ask": "tests.integration.respond_graphs:build"}}
    )
    async with open_engine(database_url, configured) as asker:
        await answer_in_slack(asker, configured)


async def answer_in_slack(asker: Engine, configured: Settings) -> None:
    async with served(asker, configured) as app:
        await asker.accounts.add_user("bob", PASSWORD, ["approvers"])
        assert (await app.desk.links.link("bob", "U0BOB", by="cli:test")).linked
        out = await asker.runner.start("lc_ask", ASK, principal="local:ann")
        assert await app.notifier.run_once() == 1
        (posted,) = app.slack.of("chat.postMessage")
        assert posted.body["channel"] == "C0DEFAULT"  # approvers has no channel of its own
        (actions,) = [b for b in posted.body["blocks"] if b["type"] == "actions"]
        ids = [e["action_id"] for e in actions["elements"]]
        assert ids == ["approvals.reject", "approvals.respond", "approvals.open"]
        ts = "1700000000.000001"
        assert (await app.post(click(posted, ts, "approvals.respond", "U0BOB"))).status_code == 200
        (opened,) = await app.slack.wait_for("views.open")
        assert opened.body["view"]["callback_id"] == "approvals.respond"

        empty = await app.post(submission(opened, "U0BOB", "   "))
        # Refused in the modal, which stays open to be corrected.
        assert empty.json()["response_action"] == "errors"
        assert await scalar(asker, "select count(*) from decisions") == 0
        answered = await app.post(submission(opened, "U0BOB", "Yes, up to 50."))
        assert answered.status_code == 200
        (update,) = await app.slack.wait_for("chat.update")
    assert update.body["blocks"][-1]["elements"][0]["text"].startswith(
        "Answered by <@U0BOB> (bob) at "
    )
    assert await asker.worker.drain() == 1
    run = await asker.runs.get(out.run_id)
    assert run is not None
    assert run.answer == "success: Yes, up to 50."
    assert await asker.effects.for_call(out.run_id, "ask-1") == []


async def test_a_signed_interaction_that_is_no_click_decides_nothing(
    engine: Engine, settings: Settings
) -> None:
    async with served(engine, settings) as app:
        await accounts(engine, app)
        _, request_id, posted, ts = await waiting_refund(engine, app)
        malformed = await app.post(b"payload=%7Bnot+json")
        assert malformed.status_code == 400
        wrong_user = json.loads(
            parse_qs(click(posted, ts, "approvals.approve", "U0BOB").decode())["payload"][0]
        )
        wrong_user["user"]["id"] = "<!channel>"
        assert (await app.post(form(wrong_user))).status_code == 400
        # The link button's click comes here too: it opens the page and decides nothing.
        opened = await app.post(click(posted, ts, "approvals.open", "U0BOB"))
        assert opened.status_code == 200
        await asyncio.sleep(0.2)
        assert [c.method for c in app.slack.calls] == ["chat.postMessage"]
    assert await status_of(engine, request_id) is RequestStatus.PENDING
    assert await audited(engine, request_id) == []
