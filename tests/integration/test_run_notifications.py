"""Run notifications: a webhook is told when a run starts waiting and when it ends, once across
workers, signed like the request notifications, without the run's input, answer or arguments."""

from __future__ import annotations

import asyncio
import json

from approvals.notify import DELIVERY_HEADER
from tests.integration.helpers import start_refund
from tests.integration.receivers import HttpReceiver, http_receiver
from tests.integration.test_notifications import PUBLIC_URL, notifying, verified
from tests.waiting import eventually
from web.engine import Engine, open_engine
from web.notifier import Notifier
from web.settings import Settings


def run_bodies(hook: HttpReceiver) -> list[dict[str, object]]:
    """The run notifications the receiver got (checking each signature), in order."""
    bodies = [verified(hook, i) for i in range(len(hook.requests))]
    return [b for b in bodies if str(b["event"]).startswith("run.")]


async def test_a_run_waiting_then_finishing_is_announced_once_each_across_two_workers(
    engine: Engine, database_url: str, settings: Settings
) -> None:
    with http_receiver() as hook:
        configured = notifying(settings, hook=hook)
        outcome = await start_refund(engine, "refund 1001")
        # A second process's engine: its own pool, so the two notifiers race in PostgreSQL.
        async with open_engine(database_url, configured) as other:
            first = Notifier.from_settings(engine.notifications, configured, engine.run_events)
            second = Notifier.from_settings(other.notifications, configured, other.run_events)
            for _ in range(3):
                await asyncio.gather(first.run_once(), second.run_once())
            waiting = run_bodies(hook)
            assert len(waiting) == 1, waiting

            await engine.decide_as_operator(outcome.pending[0], "approve", principal="lead")
            await engine.worker.drain()
            for _ in range(3):
                await asyncio.gather(first.run_once(), second.run_once())
        bodies = run_bodies(hook)
    run = await engine.runs.get(outcome.run_id)
    assert run is not None
    assert run.status == "completed"
    assert [b["event"] for b in bodies] == ["run.waiting", "run.completed"]
    assert bodies[0] == {
        "event": "run.waiting",
        "delivery_id": bodies[0]["delivery_id"],
        "run_id": outcome.run_id,
        "thread_id": outcome.thread_id,
        "graph": "refund",
        "status": "waiting",
        "pending": outcome.pending,
        "at": bodies[0]["at"],
        "url": f"{PUBLIC_URL}/api/v1/runs/{outcome.run_id}",
    }
    assert bodies[1]["pending"] == []
    # Receivers drop repeats by delivery id: run deliveries never reuse a request's.
    run_headers = [
        r.headers[DELIVERY_HEADER]
        for r in hook.requests
        if json.loads(r.body)["event"].startswith("run.")
    ]
    assert [h.startswith("run-") for h in run_headers] == [True, True]
    assert [b["delivery_id"] for b in bodies] == run_headers
    raw = b"".join(r.body for r in hook.requests).decode()
    assert "order_id" not in raw
    assert run.answer is not None
    assert run.answer not in raw
    deliveries = await engine.run_events.notifications(outcome.run_id)
    assert [(d["event"], d["status"], d["attempts"]) for d in deliveries] == [
        ("waiting", "sent", 1),
        ("completed", "sent", 1),
    ]


async def test_a_run_notification_the_receiver_refuses_for_now_is_retried(
    engine: Engine, settings: Settings
) -> None:
    with http_receiver(fail_first=None, fail_status=503) as hook:
        configured = notifying(settings, hook=hook)
        notifier = Notifier.from_settings(engine.notifications, configured, engine.run_events)
        outcome = await start_refund(engine, "refund 1001")
        events = engine.run_events

        async def retried() -> bool:
            """A notifier pass, until one attempt of the run's notification was its second."""
            deliveries = await events.notifications(outcome.run_id)
            if any(d["attempts"] >= 2 for d in deliveries):
                return True
            await notifier.run_once()
            return False

        await eventually(retried, timeout=10, what="a second attempt of the notification")
        sent = run_bodies(hook)
    deliveries = await events.notifications(outcome.run_id)
    assert [(d["event"], d["status"]) for d in deliveries] == [("waiting", "retry")]
    assert "HTTP 503" in deliveries[0]["last_error"]
    # The same delivery each time, so a receiver that got it after all drops the repeat.
    assert len({b["delivery_id"] for b in sent}) == 1
    assert len(sent) >= 2
