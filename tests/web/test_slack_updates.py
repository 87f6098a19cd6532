"""A request posted to Slack and then ended by another route (the web's decision, an operator's,
expiry, escalation, a cancelled run) has its message updated by the notifier: ``chat.update``
on the stand-in Web API for the posted channel and ts, saying who decided what and when (or how
else it ended), its decision buttons gone. A Slack failure on the update is retried as a post
is; a message a click already updated is not updated twice."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from typing import Any

import pytest

from approvals.model import RequestStatus
from approvals.principals import Principal
from tests.integration.helpers import scalar
from tests.web.slack_stand_in import Call
from tests.web.test_slack_app import (
    SUPPORT_CHANNEL,
    Served,
    accounts,
    click,
    served,
    status_of,
    waiting_refund,
)
from web.engine import Engine
from web.settings import Settings


def line_of(update: Call) -> str:
    """The message's last line: how its request ended."""
    context = update.body["blocks"][-1]
    assert context["type"] == "context"
    return str(context["elements"][0]["text"])


def buttons_of(update: Call) -> set[str]:
    return {
        e["action_id"]
        for b in update.body["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
    }


async def messages(engine: Engine, request_id: str) -> list[tuple[str, str, str, int]]:
    """The request's posted messages: channel, ts, status, attempts."""
    rows = await scalar(
        engine,
        "SELECT coalesce(json_agg(json_build_array(channel, ts, status, attempts) ORDER BY id),"
        " '[]') FROM slack_messages WHERE request_id = %s",
        request_id,
    )
    return [tuple(r) for r in rows]


async def execute(engine: Engine, query: str, *params: Any) -> None:
    async with engine.connection() as conn:
        await conn.execute(query, params)


@pytest.mark.parametrize("route", ["web", "operator"])
async def test_a_request_decided_elsewhere_has_its_message_updated(
    engine: Engine, settings: Settings, route: str
) -> None:
    async with served(engine, settings) as app:
        await accounts(engine, app)
        _, request_id, _, ts = await waiting_refund(engine, app)
        assert await messages(engine, request_id) == [(SUPPORT_CHANNEL, ts, "posted", 0)]
        # Nothing is owed while the request waits.
        assert await app.notifier.run_once() == 0
        if route == "web":
            bob = Principal.local("bob", frozenset({"support"}))
            await engine.decide(request_id, "reject", principal=bob, reason="a duplicate")
        else:
            await engine.decide_as_operator(request_id, "approve", principal="olga")
        assert await app.notifier.run_once() == 1
        (update,) = app.slack.of("chat.update")
        # Updated once: a second pass owes nothing.
        assert await app.notifier.run_once() == 0
        assert len(app.slack.of("chat.update")) == 1

    assert (update.body["channel"], update.body["ts"]) == (SUPPORT_CHANNEL, ts)
    line = line_of(update)
    if route == "web":
        assert line.startswith("Rejected by <@U0BOB> (bob) at ")
        assert line.endswith(" UTC: a duplicate")
    else:
        assert line.startswith("Approved by ")
        assert "olga" in line
    assert buttons_of(update) == {"approvals.open"}
    assert await messages(engine, request_id) == [(SUPPORT_CHANNEL, ts, "updated", 1)]


async def test_an_expired_request_has_its_message_updated(
    engine: Engine, settings: Settings
) -> None:
    async with served(engine, settings) as app:
        await accounts(engine, app)
        _, request_id, _, ts = await waiting_refund(engine, app)
        await execute(
            engine,
            "UPDATE approval_requests SET expires_at = now() - interval '1 second' WHERE id = %s",
            request_id,
        )
        await engine.drain()  # the sweeper expires it
        assert await status_of(engine, request_id) is RequestStatus.EXPIRED
        assert await app.notifier.run_once() == 1
        (update,) = app.slack.of("chat.update")
    assert (update.body["channel"], update.body["ts"]) == (SUPPORT_CHANNEL, ts)
    assert line_of(update).startswith("Expired at ")
    assert buttons_of(update) == {"approvals.open"}


async def test_an_escalated_request_has_its_earlier_message_updated_and_is_posted_again(
    engine: Engine, settings: Settings
) -> None:
    async with served(engine, settings) as app:
        await accounts(engine, app)
        _, request_id, _, ts = await waiting_refund(engine, app)
        chain = json.dumps([{"approvers": ["finance"], "expires_in_seconds": 600}])
        await execute(
            engine,
            "UPDATE approval_requests SET on_expiry = 'escalate', escalation_chain = %s::jsonb,"
            " expires_at = now() - interval '1 second' WHERE id = %s",
            chain,
            request_id,
        )
        await engine.drain()  # the sweeper escalates it to finance
        assert await status_of(engine, request_id) is RequestStatus.PENDING
        # The escalation's post (finance has no channel: the default one), and the update.
        assert await app.notifier.run_once() == 2
        (update,) = app.slack.of("chat.update")
        posts = app.slack.of("chat.postMessage")
    assert (update.body["channel"], update.body["ts"]) == (SUPPORT_CHANNEL, ts)
    assert line_of(update).startswith("Escalated to finance (level 1)")
    assert buttons_of(update) == {"approvals.open"}
    assert [p.body["channel"] for p in posts] == [SUPPORT_CHANNEL, "C0DEFAULT"]
    assert [m[2] for m in await messages(engine, request_id)] == ["updated", "posted"]


async def test_a_cancelled_runs_request_has_its_message_updated(
    engine: Engine, settings: Settings
) -> None:
    async with served(engine, settings) as app:
        await accounts(engine, app)
        run_id, request_id, _, ts = await waiting_refund(engine, app)
        await engine.cancel_run(run_id, by="operator:olga", reason="not needed")
        assert await status_of(engine, request_id) is RequestStatus.CANCELLED
        assert await app.notifier.run_once() == 1
        (update,) = app.slack.of("chat.update")
    assert (update.body["channel"], update.body["ts"]) == (SUPPORT_CHANNEL, ts)
    assert line_of(update).startswith("Cancelled at ")
    assert buttons_of(update) == {"approvals.open"}


async def test_a_slack_failure_on_the_update_is_retried(engine: Engine, settings: Settings) -> None:
    quick = settings.model_copy(update={"notify_backoff_seconds": 0.05})
    async with served(engine, quick) as app:
        await accounts(engine, app)
        _, request_id, _, ts = await waiting_refund(engine, app)
        app.slack.scripted["chat.update"] = [{"ok": False, "error": "ratelimited"}]
        await engine.decide_as_operator(request_id, "approve", principal="olga")
        assert await app.notifier.run_once() == 1
        assert await messages(engine, request_id) == [(SUPPORT_CHANNEL, ts, "retry", 1)]
        error = await scalar(engine, "SELECT last_error FROM slack_messages")
        assert error == "chat.update: ratelimited"
        deadline = time.monotonic() + 15
        while await app.notifier.run_once() == 0:
            assert time.monotonic() < deadline, "the update was never retried"
            await asyncio.sleep(0.05)
        first, second = app.slack.of("chat.update")
    assert first.body == second.body
    assert (second.body["channel"], second.body["ts"]) == (SUPPORT_CHANNEL, ts)
    assert line_of(second).startswith("Approved by ")
    assert await messages(engine, request_id) == [(SUPPORT_CHANNEL, ts, "updated", 2)]


async def test_a_message_a_click_updated_is_not_updated_again(
    engine: Engine, settings: Settings
) -> None:
    async with served(engine, settings) as app:
        await accounts(engine, app)
        _, request_id, posted, ts = await waiting_refund(engine, app)
        answer = await app.post(click(posted, ts, "approvals.approve", "U0BOB"))
        assert answer.status_code == 200
        await app.slack.wait_for("chat.update")
        await settled(engine, app, request_id)
        assert await app.notifier.run_once() == 0
        assert len(app.slack.of("chat.update")) == 1


async def settled(engine: Engine, app: Served, request_id: str) -> None:
    """Until the face has recorded the message it updated as settled (after its answer)."""
    deadline = time.monotonic() + 15
    while [m[2] for m in await messages(engine, request_id)] != ["updated"]:
        assert time.monotonic() < deadline, await messages(engine, request_id)
        await asyncio.sleep(0.02)


async def test_retention_prunes_the_messages_with_their_request(
    engine: Engine, settings: Settings
) -> None:
    async with served(engine, settings) as app:
        await accounts(engine, app)
        run_id, request_id, _, _ = await waiting_refund(engine, app)
        await engine.decide_as_operator(request_id, "approve", principal="olga")
        assert await app.notifier.run_once() == 1
    assert await engine.drain() == 1
    assert await scalar(engine, "SELECT status FROM runs WHERE id = %s", run_id) == "completed"
    await asyncio.sleep(0.05)
    pruned = await engine.prune(timedelta(milliseconds=10), principal="operator:olga")
    assert pruned.runs == 1
    assert await scalar(engine, "SELECT count(*) FROM slack_messages") == 0


async def test_a_message_slack_no_longer_has_is_given_up_at_once(
    engine: Engine, settings: Settings
) -> None:
    async with served(engine, settings) as app:
        await accounts(engine, app)
        _, request_id, _, ts = await waiting_refund(engine, app)
        app.slack.scripted["chat.update"] = [{"ok": False, "error": "message_not_found"}]
        await engine.decide_as_operator(request_id, "approve", principal="olga")
        assert await app.notifier.run_once() == 1
        assert await app.notifier.run_once() == 0
        assert len(app.slack.of("chat.update")) == 1
    assert await messages(engine, request_id) == [(SUPPORT_CHANNEL, ts, "failed", 1)]
    error = await scalar(engine, "SELECT last_error FROM slack_messages")
    assert error == "chat.update: message_not_found"
