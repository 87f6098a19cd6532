"""An operator queues a waiting run's failed resumes again (``Engine.retry_run``), once what made
them fail is gone: the decided call resumes, and the ledger still runs it at most once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from approvals.errors import InvalidRunId, InvalidValue, NothingToRetry, RunNotFound
from approvals.model import JobStatus
from tests.integration.helpers import (
    drain_failing_after_the_step,
    events_of,
    poisoned,
    run_status,
    scalar,
    side_effects,
    start_refund,
    verified,
)
from tests.integration.inprocess import invoke
from web.engine import Engine


async def failed_run(engine: Engine, message: str = "refund 1001") -> Any:
    """A run whose approved call's resume failed: the job is failed, the run still waits."""
    started = await start_refund(engine, message)
    await engine.decide_as_operator(started.pending[0], "approve", principal="bob")
    with poisoned(engine, started.run_id):
        assert await engine.worker.drain() == 1
    assert await job_status(engine, started.run_id) == JobStatus.FAILED
    assert await run_status(engine, started.run_id) == "waiting"
    return started


async def job_status(engine: Engine, run_id: str) -> str:
    return str(await scalar(engine, "SELECT status FROM resume_queue WHERE run_id = %s", run_id))


async def test_a_failed_resume_is_retried_and_its_call_runs_once(engine: Engine) -> None:
    started = await failed_run(engine)
    call = "refund-1001"
    assert await side_effects(engine, started.run_id, call) == []

    retried = await engine.retry_run(started.run_id, by="olga", reason="graph fixed")
    assert retried.to_json() == {
        "run_id": started.run_id,
        "status": "waiting",
        "jobs_requeued": 1,
    }
    assert await job_status(engine, started.run_id) == JobStatus.QUEUED
    [event] = await events_of(engine, started.run_id, "resume.retried")
    assert event["principal"] == "olga"
    assert str(event["request_id"]) == started.pending[0]
    assert event["data"]["reason"] == "graph fixed"
    assert event["data"]["error"] == 'unexpected KeyError: "a graph\'s own bug"'

    assert await engine.worker.drain() == 1
    assert await run_status(engine, started.run_id) == "completed"
    assert len(await side_effects(engine, started.run_id, call)) == 1
    assert await job_status(engine, started.run_id) == JobStatus.DONE
    await verified(engine)

    # Nothing failed any more, and the run ended: nothing to retry, nothing written.
    with pytest.raises(NothingToRetry, match="it is completed, not waiting"):
        await engine.retry_run(started.run_id, by="olga")
    assert len(await events_of(engine, started.run_id, "resume.retried")) == 1
    assert await engine.worker.drain() == 0
    assert len(await side_effects(engine, started.run_id, call)) == 1


async def test_a_waiting_run_with_no_failed_resume_has_nothing_to_retry(engine: Engine) -> None:
    started = await start_refund(engine)
    with pytest.raises(NothingToRetry, match="no resume of it failed"):
        await engine.retry_run(started.run_id, by="olga")
    # A queued (not failed) job is left to the workers, not queued twice.
    await engine.decide_as_operator(started.pending[0], "approve", principal="bob")
    with pytest.raises(NothingToRetry, match="no resume of it failed"):
        await engine.retry_run(started.run_id, by="olga")
    assert await events_of(engine, started.run_id, "resume.retried") == []
    assert await engine.worker.drain() == 1
    assert len(await side_effects(engine, started.run_id, "refund-1001")) == 1


async def test_a_cancelled_run_is_not_retried(engine: Engine) -> None:
    started = await failed_run(engine)
    await engine.cancel_run(started.run_id, by="olga", reason="customer withdrew")
    with pytest.raises(NothingToRetry, match="it is cancelled, not waiting"):
        await engine.retry_run(started.run_id, by="olga")
    assert await job_status(engine, started.run_id) == JobStatus.FAILED
    assert await engine.worker.drain() == 0
    assert await side_effects(engine, started.run_id, "refund-1001") == []


@pytest.mark.parametrize(
    ("run_id", "error"),
    [
        ("00000000-0000-4000-8000-000000000000", RunNotFound),
        ("not-a-run", InvalidRunId),
        ("", InvalidRunId),
        ("00000000-0000-4000-8000-00000000000\x00", InvalidRunId),
        ("\ud800", InvalidRunId),
    ],
)
async def test_unknown_and_forged_run_ids_are_refused(
    engine: Engine, run_id: str, error: type[Exception]
) -> None:
    with pytest.raises(error):
        await engine.retry_run(run_id, by="olga")


@pytest.mark.parametrize(
    ("principal", "reason"),
    [("olga", "fixed\x00"), ("olga", "lone \ud800 surrogate"), ("ol\x00ga", None)],
)
async def test_a_reason_or_name_the_log_cannot_keep_changes_nothing(
    engine: Engine, principal: str, reason: str | None
) -> None:
    started = await failed_run(engine)
    with pytest.raises(InvalidValue):
        await engine.retry_run(started.run_id, by=principal, reason=reason)
    assert await job_status(engine, started.run_id) == JobStatus.FAILED
    assert await events_of(engine, started.run_id, "resume.retried") == []


async def test_two_retries_at_once_queue_the_job_once(engine: Engine) -> None:
    started = await failed_run(engine)
    outcomes = await asyncio.gather(
        *(engine.retry_run(started.run_id, by=f"op{i}") for i in range(4)),
        return_exceptions=True,
    )
    assert sum(1 for o in outcomes if not isinstance(o, BaseException)) == 1
    assert all(isinstance(o, NothingToRetry) for o in outcomes if isinstance(o, BaseException))
    assert len(await events_of(engine, started.run_id, "resume.retried")) == 1
    assert await engine.worker.drain() == 1
    assert len(await side_effects(engine, started.run_id, "refund-1001")) == 1


async def test_a_retry_after_the_tool_ran_does_not_run_it_again(engine: Engine) -> None:
    """The resume failed after the refund was made (closing the job raised once): the retried
    resume finds the call in the ledger and never makes the refund a second time."""
    started = await start_refund(engine)
    await engine.decide_as_operator(started.pending[0], "approve", principal="bob")
    await drain_failing_after_the_step(engine)
    assert await job_status(engine, started.run_id) == JobStatus.FAILED
    assert len(await side_effects(engine, started.run_id, "refund-1001")) == 1

    await engine.retry_run(started.run_id, by="olga")
    assert await engine.worker.drain() == 1
    assert len(await side_effects(engine, started.run_id, "refund-1001")) == 1
    assert (
        await scalar(
            engine,
            "SELECT count(*) FROM tool_executions WHERE run_id = %s AND call_id = 'refund-1001'",
            started.run_id,
        )
        == 1
    )
    # The retried resume found the thread past the call and settled the run as it ended.
    assert await run_status(engine, started.run_id) == "completed"
    assert await job_status(engine, started.run_id) == JobStatus.SKIPPED


async def test_retrying_from_the_cli(engine: Engine, cli_env: dict[str, str]) -> None:
    started = await failed_run(engine)
    retried = await invoke(
        cli_env, "runs", "retry", started.run_id, "--reason", "graph fixed", "--as", "ops:carol"
    )
    assert retried.code == 0, retried.stderr
    assert retried.stdout.strip() == (
        f"run {started.run_id} retried (1 failed resume(s) queued again)"
    )
    [event] = await events_of(engine, started.run_id, "resume.retried")
    assert (event["principal"], event["data"]["reason"]) == ("ops:carol", "graph fixed")

    again = await invoke(cli_env, "runs", "retry", started.run_id, "--json")
    assert again.code == 3, again.stderr
    assert again.stderr.strip() == (
        f"error: nothing to retry for run {started.run_id}: no resume of it failed"
    )
    assert await engine.worker.drain() == 1
    ended = await invoke(cli_env, "runs", "retry", started.run_id, "--json")
    assert ended.code == 3
    assert "it is completed, not waiting" in ended.stderr
    unknown = await invoke(cli_env, "runs", "retry", "00000000-0000-4000-8000-000000000000")
    assert unknown.code == 4, unknown.stderr
    malformed = await invoke(cli_env, "runs", "retry", "not-a-run")
    assert malformed.code == 2, malformed.stderr
    nul = await invoke(cli_env, "runs", "retry", started.run_id, "--reason", "a\x00b")
    assert nul.code == 2, nul.stderr
    assert len(await events_of(engine, started.run_id, "resume.retried")) == 1
    assert len(await side_effects(engine, started.run_id, "refund-1001")) == 1

    other = await failed_run(engine, "refund 1002")
    as_json = await invoke(cli_env, "runs", "retry", other.run_id, "--json")
    assert as_json.code == 0, as_json.stderr
    assert as_json.json() == {"run_id": other.run_id, "status": "waiting", "jobs_requeued": 1}
    [event] = await events_of(engine, other.run_id, "resume.retried")
    assert event["principal"].startswith("cli:")


async def test_a_failed_job_needs_an_operator_only_while_its_run_waits(engine: Engine) -> None:
    """``approvals_failures{kind="job_failed"}`` counts the failed jobs an operator can act on:
    once the run is cancelled (or a retry succeeds) it drops, while the job's own status stays."""
    cancelled = await failed_run(engine)
    retried = await failed_run(engine, "refund 1002")
    snapshot = await engine.operations.metrics()
    assert (snapshot.stranded_jobs, snapshot.jobs["failed"]) == (2, 2)

    await engine.cancel_run(cancelled.run_id, by="olga", reason="cannot go on")
    await engine.retry_run(retried.run_id, by="olga")
    assert await engine.worker.drain() == 1
    snapshot = await engine.operations.metrics()
    assert (snapshot.stranded_jobs, snapshot.jobs["failed"]) == (0, 1)
    assert await job_status(engine, cancelled.run_id) == JobStatus.FAILED
