"""Notifications against real receivers on loopback: a webhook and a Slack-style HTTP server,
and an SMTP server (aiosmtpd). The notifier runs against real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from approvals.notify import (
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    sign,
    signature_headers,
    verify_signature,
)
from tests.integration.helpers import scalar, start_refund, until
from tests.integration.inprocess import invoke
from tests.integration.processes import spawn
from tests.integration.receivers import HttpReceiver, MailRecorder, http_receiver, smtp_receiver
from tests.waiting import eventually
from web.engine import Engine, open_engine
from web.notifier import Notifier
from web.settings import Settings, WebhookTarget

SECRET = "a-webhook-secret-of-some-length"
PUBLIC_URL = "https://approvals.example.com"
BACKOFF = 0.2


@pytest.fixture
def hook() -> Iterator[HttpReceiver]:
    with http_receiver() as receiver:
        yield receiver


@pytest.fixture
def slack() -> Iterator[HttpReceiver]:
    with http_receiver() as receiver:
        yield receiver


@pytest.fixture
def smtp() -> Iterator[tuple[MailRecorder, int]]:
    with smtp_receiver() as server:
        yield server


def notifying(
    settings: Settings,
    *,
    hook: HttpReceiver | None = None,
    slack: HttpReceiver | None = None,
    smtp_port: int | None = None,
    **more: Any,
) -> Settings:
    """The test's settings with the given receivers configured, and a small backoff."""
    update: dict[str, Any] = {
        "public_url": PUBLIC_URL,
        "notify_backoff_seconds": BACKOFF,
        "notify_timeout_seconds": 5.0,
        **more,
    }
    if hook is not None:
        update["notify_webhooks"] = [
            WebhookTarget(url=hook.url, secret=SecretStr(SECRET), name="ops")
        ]
    if slack is not None:
        update["notify_slack_webhook"] = SecretStr(slack.url)
    if smtp_port is not None:
        update |= {
            "notify_smtp_host": "127.0.0.1",
            "notify_smtp_port": smtp_port,
            "notify_smtp_from": "approvals@example.com",
            "notify_smtp_to": ["desk@example.com"],
            "notify_smtp_group_to": {
                "support": ["support-leads@example.com"],
                "finance": ["finance@example.com", "cfo@example.com"],
            },
        }
    return settings.model_copy(update=update)


def notifier_for(engine: Engine, settings: Settings) -> Notifier:
    return Notifier.from_settings(engine.notifications, settings)


async def pass_until(notifier: Notifier, done: Any, timeout: float = 10.0) -> None:
    """Run notifier passes (as the loop would, polling quickly) until ``done()`` holds."""

    async def passed() -> bool:
        if not done():
            await notifier.run_once()
        return bool(done())

    await eventually(passed, timeout=timeout, what="the notifications to arrive")


#: Whether every retry the notifier scheduled (sent again later, or cancelled since by a
#: decision or an escalation) is due by now: a pass from here sends whatever is still owed.
RETRIES_DUE = (
    "select coalesce(bool_and(next_attempt_at <= now()), true) from notification_deliveries"
    " where status in ('retry', 'cancelled')"
)


async def escalate(engine: Engine, request_id: str, group: str) -> None:
    """What the expiry sweeper does when a request escalates: the next group, a new deadline."""
    await scalar(
        engine,
        "UPDATE approval_requests SET escalation_level = escalation_level + 1,"
        " approvers = ARRAY[%s], expires_at = now() + interval '1 hour'"
        " WHERE id = %s RETURNING id",
        group,
        request_id,
    )


def verified(receiver: HttpReceiver, index: int = 0) -> dict[str, Any]:
    """The body of a webhook request, after checking its signature as a receiver would."""
    got = receiver.requests[index]
    assert verify_signature(
        SECRET, got.headers[TIMESTAMP_HEADER], got.body, got.headers[SIGNATURE_HEADER]
    )
    body: dict[str, Any] = json.loads(got.body)
    return body


async def test_a_waiting_call_is_announced_once_on_every_channel_signed_and_without_its_arguments(
    engine: Engine,
    settings: Settings,
    hook: HttpReceiver,
    slack: HttpReceiver,
    smtp: tuple[MailRecorder, int],
) -> None:
    mail, port = smtp
    notifier = notifier_for(engine, notifying(settings, hook=hook, slack=slack, smtp_port=port))
    outcome = await start_refund(engine, "refund 1001")
    request_id = outcome.pending[0]
    request = await engine.requests.get(request_id)
    assert request is not None
    link = f"{PUBLIC_URL}/requests/{request_id}"

    assert await notifier.run_once() == 3
    for _ in range(3):
        assert await notifier.run_once() == 0

    assert len(hook.requests) == 1
    body = verified(hook)
    assert body == {
        "event": "request.waiting",
        "delivery_id": int(hook.requests[0].headers[DELIVERY_HEADER]),
        "request_id": request_id,
        "run_id": outcome.run_id,
        "tool": "issue_refund",
        "reason": request.reason,
        "approver_groups": ["support"],
        "escalation_level": 0,
        "expires_at": request.expires_at.isoformat(),
        "url": link,
    }
    raw = hook.requests[0].body.decode()
    assert "ada@example.com" not in raw
    assert "order_id" not in raw
    assert "amount" not in raw

    assert len(slack.requests) == 1
    text = json.loads(slack.requests[0].body)["text"]
    assert "issue_refund" in text
    assert f"<{link}|" in text
    assert "a refund moves money and needs a support lead" in text
    assert "Decide by: " in text
    assert "order_id" not in text

    assert len(mail.mail) == 1
    sent = mail.mail[0]
    assert sent.sender == "approvals@example.com"
    assert sent.recipients == ["support-leads@example.com"]
    assert "issue_refund" in sent.message["Subject"]
    content = sent.message.get_content()
    assert link in content
    assert "ada@example.com" not in content

    deliveries = await engine.notifications.for_request(request_id)
    assert sorted((d["channel"], d["event"], d["status"], d["attempts"]) for d in deliveries) == [
        ("email", "waiting", "sent", 1),
        ("slack", "waiting", "sent", 1),
        ("webhook:ops", "waiting", "sent", 1),
    ]


async def test_two_workers_polling_at_once_send_each_notification_once(
    engine: Engine,
    database_url: str,
    settings: Settings,
    slack: HttpReceiver,
    smtp: tuple[MailRecorder, int],
) -> None:
    mail, port = smtp
    with http_receiver(delay=0.1) as slow_hook:
        configured = notifying(settings, hook=slow_hook, slack=slack, smtp_port=port)
        requests = [(await start_refund(engine, "refund 1001")).pending[0] for _ in range(3)]
        # A second process's engine: its own pool, so the two really race in PostgreSQL.
        async with open_engine(database_url, configured) as other:
            first, second = notifier_for(engine, configured), notifier_for(other, configured)
            for _ in range(5):
                await asyncio.gather(first.run_once(), second.run_once())
        announced = sorted(json.loads(r.body)["request_id"] for r in slow_hook.requests)
    assert announced == sorted(requests)
    assert len(slack.requests) == 3
    assert len(mail.mail) == 3
    assert await scalar(engine, "SELECT count(*) FROM notification_attempts") == 9


async def test_a_failing_receiver_is_retried_with_backoff_and_every_attempt_is_logged(
    engine: Engine, settings: Settings
) -> None:
    with http_receiver(fail_first=2, fail_status=500) as hook:
        notifier = notifier_for(engine, notifying(settings, hook=hook))
        request_id = (await start_refund(engine)).pending[0]
        await pass_until(notifier, lambda: len(hook.requests) == 3)
        for _ in range(3):
            assert await notifier.run_once() == 0

    # Each attempt is signed afresh over the same body, for the same delivery.
    assert len({r.body for r in hook.requests}) == 1
    assert len({r.headers[DELIVERY_HEADER] for r in hook.requests}) == 1
    for index in range(3):
        verified(hook, index)
    log = await engine.notifications.attempts(request_id)
    assert [(a["attempt"], a["status"], a["response_code"]) for a in log] == [
        (1, "retry", 500),
        (2, "retry", 500),
        (3, "sent", 200),
    ]
    assert all(a["channel"] == "webhook:ops" and a["event"] == "waiting" for a in log)
    assert log[0]["error"].startswith("HTTP 500")
    # Exponential: at least the base before the second attempt, twice it before the third.
    arrivals = [r.at for r in hook.requests]
    assert arrivals[1] - arrivals[0] >= BACKOFF * 0.9
    assert arrivals[2] - arrivals[1] >= 2 * BACKOFF * 0.9


async def test_operators_read_the_delivery_log_from_the_cli(
    engine: Engine, settings: Settings, cli_env: dict[str, str]
) -> None:
    with http_receiver(fail_first=1, fail_status=503) as hook:
        notifier = notifier_for(engine, notifying(settings, hook=hook))
        request_id = (await start_refund(engine)).pending[0]
        other = (await start_refund(engine)).pending[0]
        await pass_until(notifier, lambda: len(hook.requests) == 3)

    listed = await invoke(cli_env, "notifications", "list", "--json")
    assert listed.code == 0, listed.stderr
    deliveries = json.loads(listed.stdout)
    assert sorted(d["request_id"] for d in deliveries) == sorted([request_id, other])
    assert {(d["channel"], d["event"], d["status"], d["tool"]) for d in deliveries} == {
        ("webhook:ops", "waiting", "sent", "issue_refund")
    }
    assert sorted(d["attempts"] for d in deliveries) == [1, 2]

    one = await invoke(cli_env, "notifications", "list", "--request", other, "--json")
    assert [d["request_id"] for d in json.loads(one.stdout)] == [other]
    none = await invoke(cli_env, "notifications", "list", "--status", "failed", "--json")
    assert none.code == 0
    assert json.loads(none.stdout) == []

    retried = next(d["request_id"] for d in deliveries if d["attempts"] == 2)
    log = await invoke(cli_env, "notifications", "log", retried, "--json")
    assert log.code == 0, log.stderr
    assert [(a["attempt"], a["status"], a["response_code"]) for a in json.loads(log.stdout)] == [
        (1, "retry", 503),
        (2, "sent", 200),
    ]
    text = await invoke(cli_env, "notifications", "log", retried)
    assert "attempt 1: retry 503" in text.stdout
    assert "attempt 2: sent 200" in text.stdout

    # Malformed input is refused with one line and exit 2, never a traceback.
    for args in (
        ("list", "--request", "not-a-uuid"),
        ("log", "12345"),
        ("list", "--status", "lost"),
        ("list", "--limit", "0"),
    ):
        bad = await invoke(cli_env, "notifications", *args)
        assert bad.code == 2, (args, bad)
        assert "Traceback" not in bad.stderr


async def test_a_receiver_that_keeps_failing_is_given_up_after_the_last_attempt(
    engine: Engine, settings: Settings
) -> None:
    with http_receiver(fail_first=None, fail_status=503) as hook:
        notifier = notifier_for(
            engine,
            notifying(settings, hook=hook, notify_max_attempts=3, notify_backoff_seconds=0.05),
        )
        request_id = (await start_refund(engine)).pending[0]
        await pass_until(notifier, lambda: len(hook.requests) == 3)
        await until(engine, RETRIES_DUE)
        assert await notifier.run_once() == 0
    assert len(hook.requests) == 3
    log = await engine.notifications.attempts(request_id)
    assert [(a["status"], a["response_code"]) for a in log] == [
        ("retry", 503),
        ("retry", 503),
        ("failed", 503),
    ]
    assert "gave up after 3 attempts" in log[-1]["error"]
    [delivery] = await engine.notifications.for_request(request_id)
    assert delivery["status"] == "failed"


async def test_a_4xx_answer_is_not_retried(engine: Engine, settings: Settings) -> None:
    with http_receiver(fail_first=None, fail_status=400) as hook:
        notifier = notifier_for(engine, notifying(settings, hook=hook, notify_backoff_seconds=0.01))
        request_id = (await start_refund(engine)).pending[0]
        assert await notifier.run_once() == 1
        await until(engine, RETRIES_DUE)
        assert await notifier.run_once() == 0
    assert len(hook.requests) == 1
    log = await engine.notifications.attempts(request_id)
    assert [(a["attempt"], a["status"], a["response_code"]) for a in log] == [(1, "failed", 400)]


async def test_an_unreachable_receiver_is_retried_and_the_error_logged(
    engine: Engine, settings: Settings
) -> None:
    with http_receiver() as closed:
        pass  # its port is free again: connections are refused
    notifier = notifier_for(
        engine, notifying(settings, hook=closed, notify_max_attempts=2, notify_backoff_seconds=0.01)
    )
    request_id = (await start_refund(engine)).pending[0]
    await notifier.run_once()
    await until(engine, RETRIES_DUE)
    await notifier.run_once()
    log = await engine.notifications.attempts(request_id)
    assert [(a["status"], a["response_code"]) for a in log] == [("retry", None), ("failed", None)]
    assert "ConnectError" in log[0]["error"]


async def test_an_escalated_request_is_announced_again_to_its_new_approvers(
    engine: Engine,
    settings: Settings,
    hook: HttpReceiver,
    smtp: tuple[MailRecorder, int],
) -> None:
    mail, port = smtp
    notifier = notifier_for(engine, notifying(settings, hook=hook, smtp_port=port))
    request_id = (await start_refund(engine)).pending[0]
    assert await notifier.run_once() == 2

    await escalate(engine, request_id, "finance")
    assert await notifier.run_once() == 2
    assert await notifier.run_once() == 0

    assert [verified(hook, i)["event"] for i in range(2)] == [
        "request.waiting",
        "request.escalated",
    ]
    escalated = verified(hook, 1)
    assert escalated["escalation_level"] == 1
    assert escalated["approver_groups"] == ["finance"]
    assert escalated["url"] == f"{PUBLIC_URL}/requests/{request_id}"
    assert [m.recipients for m in mail.mail] == [
        ["support-leads@example.com"],
        ["finance@example.com", "cfo@example.com"],
    ]
    assert "Escalated (level 1)" in mail.mail[1].message["Subject"]


async def test_retries_stop_once_the_request_is_decided(engine: Engine, settings: Settings) -> None:
    with http_receiver(fail_first=None, fail_status=500) as hook:
        notifier = notifier_for(engine, notifying(settings, hook=hook, notify_backoff_seconds=0.05))
        decided = (await start_refund(engine)).pending[0]
        assert await notifier.run_once() == 1
        await engine.decide_as_operator(decided, "approve", principal="support:lead")
        await until(engine, RETRIES_DUE)  # the retry it had would be due by now
        assert await notifier.run_once() == 0
    assert len(hook.requests) == 1
    [delivery] = await engine.notifications.for_request(decided)
    assert delivery["status"] == "cancelled"


async def test_an_escalation_replaces_the_retries_of_the_level_before(
    engine: Engine, settings: Settings
) -> None:
    with http_receiver(fail_first=1, fail_status=500) as hook:
        notifier = notifier_for(engine, notifying(settings, hook=hook, notify_backoff_seconds=0.05))
        request_id = (await start_refund(engine)).pending[0]
        assert await notifier.run_once() == 1  # answered 500: a retry is due later
        await escalate(engine, request_id, "finance")
        await until(engine, RETRIES_DUE)  # the stale retry would be due by now
        assert await notifier.run_once() == 1  # the escalation; the stale retry is dropped
        await until(engine, RETRIES_DUE)
        assert await notifier.run_once() == 0
    assert [json.loads(r.body)["event"] for r in hook.requests] == [
        "request.waiting",
        "request.escalated",
    ]
    deliveries = await engine.notifications.for_request(request_id)
    assert [(d["escalation_level"], d["status"]) for d in deliveries] == [
        (0, "cancelled"),
        (1, "sent"),
    ]


async def test_nothing_configured_sends_nothing(engine: Engine) -> None:
    await start_refund(engine)
    assert not engine.notifier.enabled
    assert await engine.notifier.run_once() == 0
    await engine.notifier.run(asyncio.Event())  # returns at once
    assert await scalar(engine, "SELECT count(*) FROM notification_deliveries") == 0


@pytest.mark.slow
async def test_the_worker_command_sends_notifications(
    engine: Engine, cli_env: dict[str, str], hook: HttpReceiver
) -> None:
    env = cli_env | {
        "APPROVALS_PUBLIC_URL": PUBLIC_URL,
        "APPROVALS_NOTIFY_WEBHOOKS": json.dumps([{"url": hook.url, "secret": SECRET}]),
        "APPROVALS_NOTIFY_POLL_SECONDS": "0.1",
    }
    worker = await spawn(env, "worker")
    try:
        outcome = await start_refund(engine)
        request_id = outcome.pending[0]

        def events() -> list[str]:
            return sorted(json.loads(r.body)["event"] for r in hook.requests)

        async def announced() -> bool:
            # The waiting call, and (so that the starter need not poll) the waiting run.
            return events() == ["request.waiting", "run.waiting"]

        await eventually(announced, timeout=60)
    finally:
        worker.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(worker.wait(), 30)
    assert code == 0
    bodies = [verified(hook, i) for i in range(len(hook.requests))]
    assert {b["event"]: b["run_id"] for b in bodies} == {
        "request.waiting": outcome.run_id,
        "run.waiting": outcome.run_id,
    }
    assert [b["request_id"] for b in bodies if b["event"] == "request.waiting"] == [request_id]


def test_a_tampered_body_fails_verification() -> None:
    body = b'{"event":"request.waiting","tool":"issue_refund"}'
    headers = signature_headers(SECRET, body)
    timestamp, signature = headers[TIMESTAMP_HEADER], headers[SIGNATURE_HEADER]
    assert signature.startswith("sha256=")
    assert len(signature) == len("sha256=") + 64
    assert verify_signature(SECRET, timestamp, body, signature)
    assert not verify_signature(SECRET, timestamp, body.replace(b"refund", b"rEfund"), signature)
    assert not verify_signature("another-secret-entirely", timestamp, body, signature)
    assert not verify_signature(SECRET, str(int(timestamp) + 1), body, signature)
    assert not verify_signature(SECRET, "not-a-time", body, signature)
    # A header no honest sender writes is a refusal, not an exception (a receiver's 500).
    for hostile in ("sha256=\u00e9", "sha256=\ud800", signature + "\u00e9", ""):
        assert not verify_signature(SECRET, timestamp, body, hostile)


def test_an_old_or_future_timestamp_fails_verification() -> None:
    body = b"{}"
    now = time.time()
    old = str(int(now) - 301)
    assert not verify_signature(SECRET, old, body, sign(SECRET, old, body), tolerance=300)
    assert verify_signature(SECRET, old, body, sign(SECRET, old, body), tolerance=600)
    future = str(int(now) + 301)
    assert not verify_signature(SECRET, future, body, sign(SECRET, future, body), tolerance=300)


def test_notification_settings_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "APPROVALS_NOTIFY_WEBHOOKS",
        json.dumps([{"url": "https://hooks.example.com/a", "secret": SECRET}]),
    )
    monkeypatch.setenv("APPROVALS_NOTIFY_SMTP_TO", "a@example.com, b@example.com")
    monkeypatch.setenv("APPROVALS_NOTIFY_SLACK_WEBHOOK", "https://hooks.slack.example/T/B/x")
    loaded = Settings()
    secret = loaded.notify_webhooks[0].secret
    assert secret is not None
    assert secret.get_secret_value() == SECRET
    assert loaded.notify_smtp_to == ["a@example.com", "b@example.com"]
    assert "x" not in repr(loaded.notify_slack_webhook)
    monkeypatch.setenv("APPROVALS_NOTIFY_WEBHOOKS", '[{"url": "ftp://x", "secret": "short"}]')
    with pytest.raises(ValueError, match="notify_webhooks"):
        Settings()


async def test_a_receiver_that_trickles_its_answer_ends_the_attempt_before_the_lease(
    engine: Engine, settings: Settings
) -> None:
    """Each read within the timeout, the whole answer far past the lease: the attempt went on
    while another worker claimed the lapsed lease and sent the same notice again. The attempt
    is bounded as a whole (half the lease; shortened here), and is retried, not left running."""

    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
        try:
            for _ in range(100):
                await asyncio.sleep(0.2)  # a receiver that trickles: its pace is the point
                writer.write(b"x")
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    receiver = await asyncio.start_server(trickle, "127.0.0.1", 0)
    port = receiver.sockets[0].getsockname()[1]
    configured = settings.model_copy(
        update={
            "public_url": PUBLIC_URL,
            "notify_timeout_seconds": 1.0,
            "notify_webhooks": [
                WebhookTarget(
                    url=f"http://127.0.0.1:{port}/hook", secret=SecretStr(SECRET), name="ops"
                )
            ],
        }
    )
    notifier = notifier_for(engine, configured)
    assert notifier._attempt_limit < notifier._lease
    notifier._attempt_limit = 1.0
    try:
        await start_refund(engine, "refund 1001")
        started = time.monotonic()
        assert await asyncio.wait_for(notifier.run_once(), 10) == 1
        assert time.monotonic() - started < 5
    finally:
        receiver.close()
    status, error = (
        await scalar(engine, "SELECT status FROM notification_deliveries"),
        await scalar(engine, "SELECT last_error FROM notification_deliveries"),
    )
    assert status == "retry"
    assert "no complete answer within" in str(error)
