"""A worker told to stop stops now: it does not first sleep out its poll interval waiting for a
new-job notification (SIGTERM to ``approvals worker``, the web app's shutdown)."""

from __future__ import annotations

import asyncio
import time

from graphs.orchestration.worker import Worker
from tests.integration.helpers import completed, counted_waits, idle, side_effects, start_refund
from web.engine import Engine

POLL = 60.0  # far longer than any wait below: stopping must not depend on it


async def test_an_idle_worker_stops_without_waiting_out_its_poll_interval(engine: Engine) -> None:
    worker = Worker(runner=engine.runner, queue=engine.queue, poll_interval=POLL)
    stop = asyncio.Event()
    with counted_waits(engine.queue) as waits:
        task = asyncio.create_task(worker.run(stop))
        await idle(engine, waits)  # drained the empty queue; now waiting for a notification
    assert not task.done()
    began = time.monotonic()
    stop.set()
    await asyncio.wait_for(task, timeout=POLL / 4)
    assert time.monotonic() - began < POLL / 4


async def test_a_stopped_worker_still_wakes_for_work_until_then(engine: Engine) -> None:
    """Racing the wait against ``stop`` does not lose the notification path: a decision made
    while the worker idles is resumed long before the poll interval, exactly once."""
    worker = Worker(runner=engine.runner, queue=engine.queue, poll_interval=POLL)
    stop = asyncio.Event()
    with counted_waits(engine.queue) as waits:
        task = asyncio.create_task(worker.run(stop))
        try:
            run = await start_refund(engine)
            await idle(engine, waits)
            await engine.decide_as_operator(run.pending[0], "approve", principal="local:ops")
            # Long before the poll interval: only the notification can have woken it.
            await completed(engine, run.run_id, seconds=POLL / 6)
        finally:
            stop.set()
            await asyncio.wait_for(task, timeout=POLL / 4)
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1
