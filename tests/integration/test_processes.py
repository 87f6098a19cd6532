"""Across processes and crashes: decisions race, workers race, workers die mid-resume."""

from __future__ import annotations

import asyncio
import signal

import pytest

from approvals.model import ExecutionStatus
from storage.queue import CHANNEL
from tests.integration.helpers import scalar, side_effects, start_refund, thread_lock
from tests.integration.inprocess import invoke
from tests.integration.processes import cli, spawn
from tests.waiting import eventually
from web.engine import Engine

pytestmark = pytest.mark.slow


async def test_decisions_from_two_processes_consume_the_request_once(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    run = await start_refund(engine)
    for name in ("ann", "bob"):  # --as NAME: the account NAME
        await engine.accounts.add_user(name, "correct horse battery staple", ["support"])
    results = await asyncio.gather(
        cli(cli_env, "decide", run.pending[0], "approve", "--as", "ann"),
        cli(cli_env, "decide", run.pending[0], "approve", "--as", "bob"),
    )
    assert sorted(r.code for r in results) == [0, 3]
    loser = next(r for r in results if r.code == 3)
    assert "no longer pending" in loser.stderr
    assert len(loser.stderr.strip().splitlines()) == 1
    # The worker in a brand-new process resumes the run.
    drained = await cli(cli_env, "worker", "--drain")
    assert drained.code == 0, drained.stderr
    assert drained.json() == {"resumed": 1}
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1
    finished = await engine.runs.get(run.run_id)
    assert finished is not None
    assert finished.status == "completed"


async def test_two_worker_processes_draining_at_once_resume_each_run_once(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    runs = [await start_refund(engine) for _ in range(6)]
    for run in runs:
        await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    results = await asyncio.gather(
        cli(cli_env, "worker", "--drain"), cli(cli_env, "worker", "--drain")
    )
    assert all(r.code == 0 for r in results), [r.stderr for r in results]
    assert sum(r.json()["resumed"] for r in results) == 6
    for run in runs:
        assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1


async def _claimed_jobs(engine: Engine) -> int:
    # A claimed job is a row locked by a worker's open transaction.
    return int(
        await scalar(
            engine,
            "select count(*) from pg_locks l join pg_class c on c.oid = l.relation "
            "where c.relname = 'resume_queue' and l.mode = 'RowShareLock' and l.granted",
        )
    )


async def test_a_worker_killed_after_claiming_loses_nothing(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    run = await start_refund(engine)
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    async with thread_lock(engine, run.thread_id):
        # The worker claims the job, then waits for the thread lock we hold: killed there,
        # the decision is consumed and the resume has not finished.
        worker = await spawn(cli_env, "worker")
        await eventually(lambda: _claimed_jobs(engine), timeout=60)
        worker.send_signal(signal.SIGKILL)
        await worker.wait()
    assert await side_effects(engine, run.run_id, "refund-1001") == []
    assert await scalar(engine, "select status from resume_queue") == "queued"
    drained = await cli(cli_env, "worker", "--drain")
    assert drained.json() == {"resumed": 1}
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1
    finished = await engine.runs.get(run.run_id)
    assert finished is not None
    assert finished.status == "completed"


async def test_a_worker_killed_during_the_tool_is_reconciled_never_rerun(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    run = await start_refund(engine)
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    slow = {**cli_env, "APPROVALS_DEMO_TOOL_DELAY": "120"}
    worker = await spawn(slow, "worker")
    # The side effect happened; the tool has not returned, the ledger still says "started".
    await eventually(lambda: side_effects(engine, run.run_id, "refund-1001"), timeout=60)
    worker.send_signal(signal.SIGKILL)
    await worker.wait()
    started = {e.call_id: e.status for e in await engine.ledger.for_run(run.run_id)}
    assert started["refund-1001"] is ExecutionStatus.STARTED

    drained = await cli(cli_env, "worker", "--drain")
    assert drained.json() == {"resumed": 1}
    executions = {e.call_id: e.status for e in await engine.ledger.for_run(run.run_id)}
    assert executions["refund-1001"] is ExecutionStatus.OUTCOME_UNKNOWN
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1
    # The recovery was a brand-new process; what follows (the operator's view, the
    # reconciliation and its resume) is the same command run in this one.
    report = await invoke(cli_env, "runs", "show", run.run_id, "--json")
    shown = {e["call_id"]: e["status"] for e in report.json()["tool_executions"]}
    assert shown["refund-1001"] == "outcome_unknown"
    # The run waits for an operator; the refund did go out, so they say so.
    assert report.json()["status"] == "waiting"
    [reconcile] = report.json()["pending"]
    listed = (await invoke(cli_env, "outcomes", "list", "--json")).json()
    assert [(o["call_id"], o["request_id"]) for o in listed] == [("refund-1001", reconcile)]
    await engine.accounts.add_user("olga", "correct horse battery staple", ["operators"])
    decided = await invoke(cli_env, "decide", reconcile, "approve", "--as", "olga")
    assert decided.code == 0, decided.stderr
    assert (await invoke(cli_env, "worker", "--drain")).json() == {"resumed": 1}
    executions = {e.call_id: e.status for e in await engine.ledger.for_run(run.run_id)}
    assert executions["refund-1001"] is ExecutionStatus.SUCCEEDED
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1  # never run again
    finished = await engine.runs.get(run.run_id)
    assert finished is not None
    assert finished.status == "completed"
    assert (await invoke(cli_env, "outcomes", "list", "--json")).json() == []


async def _listening(engine: Engine) -> bool:
    """Whether a backend of another process LISTENs on the resume queue's channel in this
    test's database (pg_stat_activity shows a connection's last statement)."""
    return bool(
        await scalar(
            engine,
            "select count(*) from pg_stat_activity where datname = current_database()"
            " and pid <> pg_backend_pid() and query = %s",
            f"LISTEN {CHANNEL}",
        )
    )


async def test_a_running_worker_wakes_on_a_decision(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    worker = await spawn(cli_env, "worker")
    try:
        run = await start_refund(engine)
        # The decision must wake the worker, not its poll: wait until it LISTENs, which it
        # does once it found the queue empty (a fixed 2 s sleep before).
        await eventually(lambda: _listening(engine), timeout=60, interval=0.05)
        await engine.decide_as_operator(run.pending[0], "approve", principal="bob")

        async def completed() -> bool:
            found = await engine.runs.get(run.run_id)
            return found is not None and found.status == "completed"

        await eventually(completed, timeout=60)
    finally:
        worker.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(worker.wait(), 30)
    assert code == 0
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1


async def test_a_starter_killed_once_the_request_is_recorded_loses_nothing(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    starter = await spawn(
        cli_env, "runs", "start", "refund", "--input", '{"message": "refund 1004"}'
    )

    async def recorded() -> str | None:
        rows = await engine.requests.search()
        return rows[0].id if rows else None

    request_id = await eventually(recorded, timeout=60, interval=0.005)
    starter.send_signal(signal.SIGKILL)
    await starter.wait()
    # Killed somewhere between recording the request and settling the run: whichever, the
    # decision must still lead to exactly one execution and a finished run.
    await engine.decide_as_operator(request_id, "approve", principal="bob")
    drained = await cli(cli_env, "worker", "--drain")
    assert drained.code == 0, drained.stderr
    request = await engine.requests.get(request_id)
    assert request is not None
    assert len(await side_effects(engine, request.run_id, request.call_id)) == 1
    finished = await engine.runs.get(request.run_id)
    assert finished is not None
    assert finished.status == "completed"
