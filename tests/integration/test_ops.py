"""Operations against real PostgreSQL: cancelling runs (also racing a decision) and JSON log
lines (retention has its own module, test_retention.py)."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from approvals.errors import RequestNotPending, RunEnded, RunNotFound, ThreadBusy
from approvals.model import JobStatus, RequestStatus, RunStatus
from tests.integration.helpers import (
    WAITS_FOR_A_LOCK,
    side_effects,
    start_refund,
    thread_lock,
    until,
)
from tests.integration.inprocess import invoke
from web.engine import Engine


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
    await engine.accounts.add_user("bob", "correct horse battery staple", ["support"])
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
        await until(engine, WAITS_FOR_A_LOCK)  # the cancel waits for the thread's lock
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
                "SELECT approvals_settle_step_v2(%s, '[]', 'completed', NULL, 'done', '{}', '{}')"
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
