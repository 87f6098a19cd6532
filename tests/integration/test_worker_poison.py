"""A resume that raises what the engine does not know of fails its job, loudly, and the worker
goes on: left queued, every worker would claim it again and stop on it the same way."""

from __future__ import annotations

from typing import Any

import pytest

from approvals.model import JobStatus
from tests.integration.helpers import poisoned, scalar, side_effects, start_refund
from web.engine import Engine


async def test_a_job_whose_resume_raises_unexpectedly_fails_and_the_next_is_resumed(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    poisoned = await start_refund(engine, "refund 1001")
    healthy = await start_refund(engine, "refund 1002")
    await engine.decide_as_operator(poisoned.pending[0], "approve", principal="bob")
    await engine.decide_as_operator(healthy.pending[0], "approve", principal="bob")
    runner = engine.runner
    original = runner.resume

    async def resume(claimed: Any) -> Any:
        if claimed.job.run_id == poisoned.run_id:
            raise KeyError("a graph's own bug")
        return await original(claimed)

    runner.resume = resume  # type: ignore[method-assign]
    try:
        assert await engine.worker.drain() == 2
    finally:
        runner.resume = original  # type: ignore[method-assign]
    status, error = await scalar(
        engine,
        "SELECT ARRAY[status, last_error] FROM resume_queue WHERE run_id = %s",
        poisoned.run_id,
    )
    assert status == JobStatus.FAILED
    assert error == 'unexpected KeyError: "a graph\'s own bug"'
    assert "failed unexpectedly" in caplog.text
    assert await side_effects(engine, poisoned.run_id, "refund-1001") == []
    assert len(await side_effects(engine, healthy.run_id, "refund-1002")) == 1
    # Nothing is left for a worker to trip over again.
    assert await engine.worker.drain() == 0


async def test_a_failed_resume_is_a_run_event_and_a_retry_follows_it(engine: Engine) -> None:
    """A resume that fails without settling its run records 'resume_failed' (the run still
    waits), after the decision's 'resuming'; a retry's resume is 'resuming' again, and the run's
    end its status. A resume that fails its run (a settlement) records only that status."""
    started = await start_refund(engine, "refund 1001")
    await engine.decide_as_operator(started.pending[0], "approve", principal="bob")
    with poisoned(engine, started.run_id):
        assert await engine.worker.drain() == 1
    events = await engine.run_events.after(started.run_id, 0, 100)
    assert [e["kind"] for e in events[-2:]] == ["resuming", "resume_failed"]
    assert events[-1]["data"] == {"status": "waiting"}

    await engine.retry_run(started.run_id, by="olga")
    assert await engine.worker.drain() == 1
    events = await engine.run_events.after(started.run_id, events[-1]["id"], 100)
    assert events[0]["kind"] == "resuming"
    assert events[-1]["kind"] == "status"
    assert events[-1]["data"]["status"] == "completed"
    assert "resume_failed" not in [e["kind"] for e in events]
