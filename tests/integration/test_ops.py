"""Operations against real PostgreSQL: cancelling runs (also racing a decision), pruning old
checkpoints while the decision log stays whole, and JSON log lines."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from psycopg import sql

from approvals.errors import RequestNotPending, RunEnded, RunNotFound, ThreadBusy
from approvals.model import JobStatus, RequestStatus, RunStatus
from tests.integration.helpers import scalar, side_effects, start_refund, thread_lock
from tests.integration.inprocess import invoke
from web.engine import Engine

CHECKPOINT_TABLES = ("checkpoints", "checkpoint_writes", "checkpoint_blobs")
ENGINE_TABLES = (
    "runs",
    "approval_requests",
    "decisions",
    "audit_events",
    "interception_records",
    "tool_executions",
)


async def count(engine: Engine, table: str, thread_id: str | None = None) -> int:
    """Rows of ``table``, all or one thread's."""
    query = sql.SQL("SELECT count(*) AS n FROM {}").format(sql.Identifier(table))
    if thread_id is not None:
        query += sql.SQL(" WHERE thread_id = {}").format(sql.Literal(thread_id))
    async with engine.connection() as conn:
        row = await (await conn.execute(query)).fetchone()
    assert row is not None
    return int(row["n"])


async def job_statuses(engine: Engine, run_id: str) -> list[str]:
    async with engine.connection() as conn:
        rows = await (
            await conn.execute("SELECT status FROM resume_queue WHERE run_id = %s", (run_id,))
        ).fetchall()
    return [r["status"] for r in rows]


async def audit_kinds(engine: Engine, run_id: str) -> list[str]:
    return [e["kind"] for e in await engine.audit.for_run(run_id)]


# ---- runs cancel ---------------------------------------------------------------------------


@pytest.mark.slow
async def test_cancelling_a_waiting_run_from_the_cli(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    run = await start_refund(engine, "Refund orders 1001 and 1002")
    cancelled = await invoke(
        cli_env,
        "runs",
        "cancel",
        run.run_id,
        "--reason",
        "customer withdrew",
        "--as",
        "ops:carol",
        "--json",
    )
    assert cancelled.code == 0, cancelled.stderr
    assert cancelled.json() == {
        "run_id": run.run_id,
        "status": "cancelled",
        "requests_cancelled": 2,
        "jobs_skipped": 0,
    }
    stored = await engine.runs.get(run.run_id)
    assert stored is not None
    assert stored.status is RunStatus.CANCELLED
    assert stored.error == "cancelled by ops:carol: customer withdrew"
    for request in await engine.requests.for_run(run.run_id):
        assert request.status is RequestStatus.CANCELLED

    event = next(e for e in await engine.audit.for_run(run.run_id) if e["kind"] == "run.cancelled")
    assert event["principal"] == "ops:carol"
    assert event["data"]["reason"] == "customer withdrew"
    assert (await audit_kinds(engine, run.run_id)).count("request.cancelled") == 2

    # Its requests can no longer be decided: exit 3, like any request no longer pending.
    decided = await invoke(cli_env, "decide", run.pending[0], "approve", "--as", "bob")
    assert decided.code == 3, decided.stderr
    assert "cancelled" in decided.stderr
    shown = (await invoke(cli_env, "runs", "show", run.run_id, "--json")).json()
    assert shown["status"] == "cancelled"
    assert shown["pending"] == []


@pytest.mark.slow
async def test_cancel_exit_codes(engine: Engine, cli_env: dict[str, str]) -> None:
    finished = await engine.runner.start("refund", {"message": "refund 1003"}, principal="alice")
    assert finished.status is RunStatus.COMPLETED
    ended = await invoke(cli_env, "runs", "cancel", finished.run_id)
    assert ended.code == 3
    assert ended.stderr.strip() == (
        f"error: run {finished.run_id} already ended (status: completed)"
    )
    unknown = await invoke(cli_env, "runs", "cancel", str(uuid.uuid4()))
    assert unknown.code == 4, unknown.stderr
    malformed = await invoke(cli_env, "runs", "cancel", "not-a-run")
    assert malformed.code == 2, malformed.stderr

    waiting = await start_refund(engine)
    first = await invoke(cli_env, "runs", "cancel", waiting.run_id)
    assert first.code == 0, first.stderr
    assert first.stdout.startswith(f"run {waiting.run_id} cancelled (1 pending request(s)")
    again = await invoke(cli_env, "runs", "cancel", waiting.run_id)
    assert again.code == 3
    assert "status: cancelled" in again.stderr
    assert (await audit_kinds(engine, waiting.run_id)).count("run.cancelled") == 1


async def test_cancelling_skips_the_queued_resume_of_a_decided_call(engine: Engine) -> None:
    run = await start_refund(engine)
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    cancelled = await engine.operations.cancel(run.run_id, principal="ops", reason=None)
    assert (cancelled.requests, cancelled.jobs) == (0, 1)
    assert await job_statuses(engine, run.run_id) == [JobStatus.SKIPPED]
    assert await engine.worker.drain() == 0
    assert await side_effects(engine, run.run_id, "refund-1001") == []
    assert "resume.skipped" in await audit_kinds(engine, run.run_id)


async def test_a_job_the_cancel_could_not_lock_is_skipped_by_the_worker(engine: Engine) -> None:
    # The job is held (as a worker's claim holds it) while the cancel runs, so the cancel leaves
    # it queued; the worker that then claims it must find the run cancelled and not resume it.
    run = await start_refund(engine)
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    async with engine.connection() as holder, holder.transaction():
        await holder.execute(
            "SELECT id FROM resume_queue WHERE run_id = %s FOR UPDATE", (run.run_id,)
        )
        cancelled = await engine.operations.cancel(run.run_id, principal="ops", reason=None)
        assert cancelled.jobs == 0
    assert await job_statuses(engine, run.run_id) == [JobStatus.QUEUED]
    assert await engine.worker.drain() == 1
    assert await job_statuses(engine, run.run_id) == [JobStatus.SKIPPED]
    assert await side_effects(engine, run.run_id, "refund-1001") == []
    stored = await engine.runs.get(run.run_id)
    assert stored is not None
    assert stored.status is RunStatus.CANCELLED


async def test_a_thread_whose_run_was_cancelled_while_waiting_takes_new_input(
    engine: Engine,
) -> None:
    run = await start_refund(engine)
    with pytest.raises(ThreadBusy):  # still waiting: new input is refused
        await engine.runner.start(
            "refund", {"message": "refund 1002"}, principal="alice", thread_id=run.thread_id
        )
    await engine.operations.cancel(run.run_id, principal="ops", reason="wrong order")

    follow_up = await engine.runner.start(
        "refund", {"message": "refund 1002"}, principal="alice", thread_id=run.thread_id
    )
    assert follow_up.status == "waiting", follow_up
    assert follow_up.thread_id == run.thread_id

    graph = engine.registry.get("refund")
    state = await graph.aget_state({"configurable": {"thread_id": run.thread_id}})
    results = {m.tool_call_id: m for m in state.values["messages"] if isinstance(m, ToolMessage)}
    # The lookup that finished before the cancel keeps its result; the waiting refund answers
    # "cancelled" and never ran; the model is told the run was cancelled.
    assert "error" not in json.loads(str(results["lookup-1001"].content))
    cancelled = json.loads(str(results["refund-1001"].content))["error"]
    assert cancelled["code"] == "cancelled"
    assert "wrong order" in cancelled["message"]
    notices = [m.content for m in state.values["messages"] if isinstance(m, AIMessage)]
    assert any(f"Run {run.run_id} was cancelled" in str(c) for c in notices)
    assert await side_effects(engine, run.run_id, "refund-1001") == []

    # The old request stays cancelled; the new run's request is the one waiting.
    with pytest.raises(RequestNotPending):
        await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    await engine.decide_as_operator(follow_up.pending[0], "approve", principal="bob")
    await engine.worker.drain()
    done = await engine.runs.get(follow_up.run_id)
    assert done is not None
    assert done.status == RunStatus.COMPLETED
    assert len(await side_effects(engine, follow_up.run_id, "refund-1002")) == 1
    old = await engine.runs.get(run.run_id)
    assert old is not None
    assert old.status == RunStatus.CANCELLED


async def test_a_cancel_waits_for_the_step_in_progress(engine: Engine) -> None:
    run = await start_refund(engine)
    operations = engine.operations
    async with thread_lock(engine, run.thread_id):
        cancelling = asyncio.create_task(
            operations.cancel(run.run_id, principal="ops", reason=None)
        )
        await asyncio.sleep(0.5)
        assert not cancelling.done()
    cancelled = await asyncio.wait_for(cancelling, 10)
    assert cancelled.requests == 1


async def test_a_cancelled_run_stays_cancelled(engine: Engine) -> None:
    run = await start_refund(engine)
    await engine.operations.cancel(run.run_id, principal="ops", reason=None)
    # What a step that was already running would write when it settles: refused, and said so.
    async with engine.connection() as conn:
        row = await (
            await conn.execute(
                "SELECT approvals_settle_step_v1(%s, '[]', 'completed', NULL, 'done', '{}', '{}')"
                " AS outcome",
                (run.run_id,),
            )
        ).fetchone()
    assert row is not None
    assert row["outcome"] == "refused"
    stored = await engine.runs.get(run.run_id)
    assert stored is not None
    assert stored.status is RunStatus.CANCELLED


async def test_cancelling_an_ended_or_unknown_run_is_refused(engine: Engine) -> None:
    operations = engine.operations
    run = await start_refund(engine)
    await operations.cancel(run.run_id, principal="ops", reason="first")
    with pytest.raises(RunEnded) as ended:
        await operations.cancel(run.run_id, principal="ops", reason="second")
    assert ended.value.status == "cancelled"
    with pytest.raises(RunNotFound):
        await operations.cancel(str(uuid.uuid4()), principal="ops", reason=None)


async def test_a_decision_racing_a_cancel_never_resumes_the_run(engine: Engine) -> None:
    operations = engine.operations
    outcomes = set()
    for _ in range(8):
        run = await start_refund(engine)
        request_id = run.pending[0]
        decided, cancelled = await asyncio.gather(
            engine.decide_as_operator(request_id, "approve", principal="bob"),
            operations.cancel(run.run_id, principal="ops", reason="race"),
            return_exceptions=True,
        )
        assert not isinstance(cancelled, BaseException), cancelled
        if isinstance(decided, BaseException):
            assert isinstance(decided, RequestNotPending), decided
            outcomes.add("cancel first")
        else:
            outcomes.add("decision first")
        await engine.worker.drain()
        stored = await engine.runs.get(run.run_id)
        assert stored is not None
        assert stored.status is RunStatus.CANCELLED
        assert await side_effects(engine, run.run_id, "refund-1001") == []
        executed = {e.call_id for e in await engine.ledger.for_run(run.run_id)}
        assert "refund-1001" not in executed
        assert JobStatus.QUEUED not in await job_statuses(engine, run.run_id)
    assert outcomes  # which one won each time is up to the scheduler


# ---- retention prune -----------------------------------------------------------------------


async def backdate(engine: Engine, run_id: str, days: int) -> None:
    async with engine.connection() as conn:
        await conn.execute(
            "UPDATE runs SET updated_at = now() - make_interval(days => %s) WHERE id = %s",
            (days, run_id),
        )


async def completed_refund(engine: Engine, thread_id: str | None = None) -> str:
    """A run that paused, was approved and completed: it has a decision and tool execution."""
    run = await engine.runner.start(
        "refund", {"message": "refund 1001"}, principal="alice", thread_id=thread_id
    )
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    assert await engine.worker.drain() == 1
    stored = await engine.runs.get(run.run_id)
    assert stored is not None
    assert stored.status is RunStatus.COMPLETED
    return run.run_id


@pytest.mark.slow
async def test_retention_prunes_checkpoints_of_old_finished_runs_only(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    old = await completed_refund(engine)
    await backdate(engine, old, 40)
    recent = await completed_refund(engine)
    waiting_old = (await start_refund(engine)).run_id
    await backdate(engine, waiting_old, 40)
    # An old finished run whose thread a newer run still waits on: the thread is in use.
    shared_old = await completed_refund(engine, thread_id="customer-7")
    await backdate(engine, shared_old, 40)
    await engine.runner.start(
        "refund", {"message": "refund 1002"}, principal="alice", thread_id="customer-7"
    )
    cancelled_old = (await start_refund(engine)).run_id
    await engine.operations.cancel(cancelled_old, principal="ops", reason=None)
    await backdate(engine, cancelled_old, 31)

    threads = {
        run_id: (await engine.runs.get(run_id)).thread_id  # type: ignore[union-attr]
        for run_id in (old, recent, waiting_old, shared_old, cancelled_old)
    }
    pruned_threads = {threads[old], threads[cancelled_old]}
    before = {
        thread: {t: await count(engine, t, thread) for t in CHECKPOINT_TABLES}
        for thread in threads.values()
    }
    kept = {t: await count(engine, t) for t in ENGINE_TABLES}
    assert all(before[t]["checkpoints"] > 0 for t in threads.values())

    dry = await invoke(cli_env, "retention", "prune", "--older-than", "30d", "--dry-run", "--json")
    assert dry.code == 0, dry.stderr
    expected = {t: sum(before[thread][t] for thread in pruned_threads) for t in CHECKPOINT_TABLES}
    assert dry.json() | {"older_than": "30d"} == {
        "threads": 2,
        "checkpoints": expected["checkpoints"],
        "checkpoint_writes": expected["checkpoint_writes"],
        "checkpoint_blobs": expected["checkpoint_blobs"],
        "rows": sum(expected.values()),
        "busy_threads": 0,
        "dry_run": True,
        "older_than": "30d",
    }
    assert await count(engine, "checkpoints", threads[old]) == before[threads[old]]["checkpoints"]

    pruned = await invoke(cli_env, "retention", "prune", "--older-than", "30d", "--json")
    assert pruned.code == 0, pruned.stderr
    assert pruned.json()["threads"] == 2
    assert pruned.json()["dry_run"] is False
    assert pruned.json()["rows"] == sum(expected.values())
    for thread in threads.values():
        for table in CHECKPOINT_TABLES:
            left = await count(engine, table, thread)
            assert left == (0 if thread in pruned_threads else before[thread][table]), (
                thread,
                table,
            )
    # The engine's own records, the decision log among them, are all still there (one more
    # audit event: the prune itself).
    after = {t: await count(engine, t) for t in ENGINE_TABLES}
    assert after == kept | {"audit_events": kept["audit_events"] + 1}
    assert len(await engine.audit.for_run(old)) > 0
    event = await scalar(
        engine, "SELECT data FROM audit_events WHERE kind = 'retention.pruned' ORDER BY id DESC"
    )
    assert event["threads"] == 2

    again = await invoke(cli_env, "retention", "prune", "--older-than", "30d")
    assert again.code == 0, again.stderr
    assert again.stdout.startswith("pruned the checkpoints of 0 thread(s)")
    bad = await invoke(cli_env, "retention", "prune", "--older-than", "a month")
    assert bad.code == 2
    assert "not an age" in bad.stderr


async def test_prune_runs_in_batches_and_leaves_busy_threads(engine: Engine) -> None:
    runs = []
    for _ in range(3):
        run = await engine.runner.start("refund", {"message": "refund 1003"}, principal="alice")
        await backdate(engine, run.run_id, 10)
        runs.append(run)
    operations = engine.operations
    # A step holding one thread's lock: that thread waits for a later prune.
    async with thread_lock(engine, runs[0].thread_id):
        pruned = await operations.prune(timedelta(days=7), principal="ops", batch=2)
    assert (pruned.threads, pruned.busy) == (2, 1)
    assert await count(engine, "checkpoints", runs[0].thread_id) > 0
    pruned = await operations.prune(timedelta(days=7), principal="ops", batch=2)
    assert (pruned.threads, pruned.busy) == (1, 0)
    for run in runs:
        assert await count(engine, "checkpoints", run.thread_id) == 0


# ---- structured logs -----------------------------------------------------------------------


@pytest.mark.slow
async def test_json_logs_are_one_object_per_line(engine: Engine, cli_env: dict[str, str]) -> None:
    run = await start_refund(engine)
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    env = cli_env | {"APPROVALS_LOG_FORMAT": "json"}
    drained = await invoke(env, "worker", "--drain")
    assert drained.code == 0, drained.stderr
    assert drained.json() == {"resumed": 1}
    lines = [line for line in drained.stderr.splitlines() if line.strip()]
    assert lines
    records = [json.loads(line) for line in lines]
    for record in records:
        assert {"time", "level", "logger", "message"} <= set(record)
    resumed = next(r for r in records if r["message"].startswith("resuming run"))
    assert resumed["level"] == "INFO"
    assert resumed["logger"] == "approvals.worker"
    assert resumed["run_id"] == run.run_id
    assert resumed["request_id"] == run.pending[0]

    # The default stays one readable line per record.
    second = await start_refund(engine)
    await engine.decide_as_operator(second.pending[0], "approve", principal="bob")
    text = await invoke(cli_env, "worker", "--drain")
    assert text.code == 0, text.stderr
    assert f"INFO approvals.worker: resuming run {second.run_id}" in text.stderr
    assert all(not line.startswith("{") for line in text.stderr.splitlines())
