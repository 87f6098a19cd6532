"""Every consumed decision resumes its run once; tool calls of one turn are decided apart."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import pytest

from approvals.errors import ThreadBusy
from approvals.model import (
    DecisionRecord,
    ExecutionStatus,
    JobStatus,
    RequestStatus,
    ResumeJob,
    ToolExecution,
)
from graphs.run.outcome import RunOutcome
from tests.integration.helpers import scalar, side_effects, start_refund, thread_lock, until
from web.engine import Engine, open_engine
from web.settings import Settings


async def test_parallel_tool_calls_are_decided_independently(engine: Engine) -> None:
    run = await start_refund(engine, "Refund orders 1001 and 1002")
    assert len(run.pending) == 2
    requests = {r.call_id: r for r in await engine.requests.for_run(run.run_id)}
    first, second = requests["refund-1001"], requests["refund-1002"]
    assert first.interrupt_id
    assert second.interrupt_id
    assert first.interrupt_id != second.interrupt_id
    assert first.state_version is not None

    await engine.decide_as_operator(first.id, "approve", principal="bob")
    assert await engine.worker.drain() == 1

    # The decided call ran; the other still waits, untouched and still pending.
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1
    assert await side_effects(engine, run.run_id, "refund-1002") == []
    status = await engine.runs.get(run.run_id)
    assert status is not None
    assert status.status == "waiting"
    still = await engine.requests.get(second.id)
    assert still is not None
    assert still.status is RequestStatus.PENDING

    await engine.decide_as_operator(second.id, "reject", principal="bob", reason="already refunded")
    assert await engine.worker.drain() == 1
    done = await engine.runs.get(run.run_id)
    assert done is not None
    assert done.status == "completed"
    assert await side_effects(engine, run.run_id, "refund-1002") == []
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1
    graph = engine.registry.get("refund")
    state = await graph.aget_state({"configurable": {"thread_id": run.thread_id}})
    answer = state.values["messages"][-1].content
    assert "Refunded 25.00 on order 1001" in answer
    assert "already refunded" in answer


async def test_both_calls_decided_before_the_worker_runs(engine: Engine) -> None:
    run = await start_refund(engine, "Refund orders 1001 and 1002")
    for request_id in run.pending:
        await engine.decide_as_operator(request_id, "approve", principal="bob")
    # One resume runs both calls (the second call's decision is read from the database);
    # the second job then finds nothing pending and is skipped, not executed again.
    assert await engine.worker.drain() == 2
    statuses = await scalar(
        engine, "select string_agg(status, ',' order by status) from resume_queue"
    )
    assert statuses in {"done,skipped", "done,done"}
    for call_id in ("refund-1001", "refund-1002"):
        assert len(await side_effects(engine, run.run_id, call_id)) == 1
    done = await engine.runs.get(run.run_id)
    assert done is not None
    assert done.status == "completed"


async def test_two_workers_draining_at_once_resume_each_run_once(
    engine: Engine, database_url: str, settings: Settings
) -> None:
    runs = [await start_refund(engine) for _ in range(8)]
    for run in runs:
        await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    async with open_engine(database_url, settings) as other:
        counts = await asyncio.gather(engine.worker.drain(), other.worker.drain())
    assert sum(counts) == 8
    for run in runs:
        assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1
        finished = await engine.runs.get(run.run_id)
        assert finished is not None
        assert finished.status == "completed"
    assert await scalar(engine, "select count(*) from resume_queue where status = 'done'") == 8


def _job_for(decision: DecisionRecord, run: RunOutcome) -> ResumeJob:
    """The resume job a decision queues, as a second deliverer would hold it."""
    return ResumeJob(
        id=0,
        request_id=decision.request_id,
        decision_id=decision.id,
        run_id=run.run_id,
        thread_id=run.thread_id,
        call_id="refund-1001",
        graph="refund",
        attempts=0,
    )


async def _ledger_started(engine: Engine, run: RunOutcome) -> None:
    """The ledger row an execution of the refund call writes before the tool runs (with the
    identity of the arguments the approver is shown: those the call runs with)."""
    request = await engine.requests.get(run.pending[0])
    assert request is not None
    await engine.ledger.begin(
        run_id=run.run_id,
        call_id="refund-1001",
        tool="issue_refund",
        key="k",
        args_identity=request.identity,
    )


class _HeldJob:
    """A resume job as a second deliverer would hold it (e.g. a redelivered message)."""

    def __init__(self, job: ResumeJob) -> None:
        self._job = job
        self.status: str | None = None

    @property
    def job(self) -> ResumeJob:
        return self._job

    async def complete(
        self, status: JobStatus, error: str | None = None, settlement: object = None
    ) -> None:
        self.status = status


async def test_racing_resumes_of_one_thread_execute_the_tool_once(engine: Engine) -> None:
    run = await start_refund(engine)
    decision = await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    assert isinstance(decision, DecisionRecord)
    job = _job_for(decision, run)

    async def resume(held: _HeldJob) -> None:
        async with thread_lock(engine, run.thread_id):
            await engine.runner.resume(held)

    held = [_HeldJob(job) for _ in range(4)]
    await asyncio.gather(*(resume(h) for h in held))
    assert sorted(str(h.status) for h in held) == ["done", "skipped", "skipped", "skipped"]
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1


async def test_resuming_an_already_resumed_call_is_skipped(engine: Engine) -> None:
    run = await start_refund(engine)
    decision = await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    assert isinstance(decision, DecisionRecord)
    await engine.worker.drain()
    replay = _HeldJob(_job_for(decision, run))
    assert await engine.runner.resume(replay) is None
    assert replay.status == JobStatus.SKIPPED
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1


async def test_a_started_execution_that_never_finished_is_not_run_again(engine: Engine) -> None:
    # What a crash between the ledger's "started" and "finished" leaves behind.
    run = await start_refund(engine)
    await _ledger_started(engine, run)
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    await engine.worker.drain()
    executions = {e.call_id: e for e in await engine.ledger.for_run(run.run_id)}
    assert executions["refund-1001"].status is ExecutionStatus.OUTCOME_UNKNOWN
    assert await side_effects(engine, run.run_id, "refund-1001") == []
    # The run waits for an operator to say whether the call took effect.
    waiting = await engine.runs.get(run.run_id)
    assert waiting is not None
    assert waiting.status == "waiting"
    [reconcile] = [
        r
        for r in await engine.requests.for_run(run.run_id)
        if r.status == "pending" and r.tool == "@reconcile:issue_refund"
    ]
    assert reconcile.approvers == ("operators",)
    assert reconcile.allow_edit is False
    assert reconcile.shown["args"]["order_id"] == "1001"
    await engine.decide_as_operator(
        reconcile.id, "reject", principal="olga", reason="no refund in the bank"
    )
    await engine.worker.drain()
    executions = {e.call_id: e for e in await engine.ledger.for_run(run.run_id)}
    assert executions["refund-1001"].status is ExecutionStatus.FAILED
    assert "it did not take effect (reconciled by olga" in (executions["refund-1001"].error or "")
    assert await side_effects(engine, run.run_id, "refund-1001") == []
    done = await engine.runs.get(run.run_id)
    assert done is not None
    assert done.status == "completed"
    assert done.answer is not None
    assert "not_executed" in done.answer


async def test_email_agent_sends_only_after_approval(engine: Engine) -> None:
    out = await engine.runner.start(
        "email", {"message": "Email bob@example.com about the quarterly report"}, principal="ann"
    )
    assert out.status == "waiting"
    request = await engine.requests.get(out.pending[0])
    assert request is not None
    assert request.tool == "send_email"
    assert request.shown["args"]["to"] == "bob@example.com"
    assert await side_effects(engine, out.run_id, "send-1") == []
    await engine.decide_as_operator(out.pending[0], "approve", principal="bob")
    await engine.worker.drain()
    assert len(await side_effects(engine, out.run_id, "send-1")) == 1


async def test_allowed_tools_run_without_a_request(engine: Engine) -> None:
    out = await engine.runner.start("refund", {"message": "refund 1003"}, principal="ann")
    # Order 1003 is unpaid: the lookup runs, no refund is proposed, nothing waits.
    assert out.status == "completed"
    assert out.pending == []
    assert await scalar(engine, "select count(*) from approval_requests") == 0


async def test_a_step_cut_short_after_the_request_was_recorded_is_continued(
    engine: Engine,
) -> None:
    # What a crash between recording the request and checkpointing its interrupt leaves: a
    # pending request, and a step whose task has no interrupt written.
    run = await start_refund(engine)
    async with engine.connection() as conn:
        await conn.execute(
            "delete from checkpoint_writes where thread_id = %s and channel = '__interrupt__'",
            (run.thread_id,),
        )
    graph = engine.registry.get("refund")
    state = await graph.aget_state({"configurable": {"thread_id": run.thread_id}})
    assert state.next == ("tools",)
    assert not any(task.interrupts for task in state.tasks)

    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    assert await engine.worker.drain() == 1
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1
    done = await engine.runs.get(run.run_id)
    assert done is not None
    assert done.status == "completed"


async def test_new_input_on_a_thread_that_waits_is_refused(engine: Engine) -> None:
    run = await start_refund(engine)
    with pytest.raises(ThreadBusy):
        await engine.runner.start(
            "refund", {"message": "refund 1002"}, principal="alice", thread_id=run.thread_id
        )
    assert await scalar(engine, "select count(*) from runs") == 1
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    await engine.worker.drain()
    # Once the thread is done, the conversation can go on.
    follow_up = await engine.runner.start(
        "refund", {"message": "refund 1002"}, principal="alice", thread_id=run.thread_id
    )
    assert follow_up.status == "waiting"
    assert follow_up.thread_id == run.thread_id


async def test_a_worker_without_the_graph_leaves_the_job_queued(
    engine: Engine, database_url: str, tmp_path: object
) -> None:
    from approvals.errors import GraphLoadError

    run = await start_refund(engine)
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    # Queued behind the refund: a run of a graph the misconfigured worker can build.
    mail = await engine.runner.start(
        "email", {"message": "Email bob@example.com about the quarterly report"}, principal="ann"
    )
    await engine.decide_as_operator(mail.pending[0], "approve", principal="bob")
    misconfigured = Settings(
        database_url=database_url,
        graphs={"refund": "nowhere:build", "email": "graphs.examples.email:build"},
        worker_concurrency=1,
    )
    async with open_engine(database_url, misconfigured) as other:
        # The refund's job is set aside, not claimed again and again: the one behind it is
        # resumed first (with one lane, a job of an unbuildable graph stopped every other
        # run), then the drain says what it left.
        with pytest.raises(GraphLoadError):
            await other.worker.drain()
    assert len(await side_effects(engine, mail.run_id, "send-1")) == 1
    assert (
        await scalar(engine, "select status from resume_queue where run_id = %s", run.run_id)
        == "queued"
    )
    assert await engine.worker.drain() == 1
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1


async def test_a_database_failure_mid_resume_leaves_the_job_for_a_retry(
    engine: Engine, admin_url: str, database_url: str
) -> None:
    import psycopg

    from approvals.errors import DatabaseUnavailable

    run = await start_refund(engine)
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    name = urlsplit(database_url).path.lstrip("/")

    async def cut_connections() -> None:
        # Kill every other backend of this database while the worker resumes.
        async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
            await conn.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity "
                "where datname = %s and pid <> pg_backend_pid()",
                (name,),
            )

    original = engine.ledger.begin

    async def begin_then_cut(
        *, run_id: str, call_id: str, tool: str, key: str, args_identity: str
    ) -> tuple[bool, ToolExecution]:
        if call_id == "refund-1001":
            await cut_connections()
        return await original(
            run_id=run_id, call_id=call_id, tool=tool, key=key, args_identity=args_identity
        )

    engine.ledger.begin = begin_then_cut  # type: ignore[method-assign]
    try:
        with pytest.raises(DatabaseUnavailable):
            await engine.worker.drain()
    finally:
        engine.ledger.begin = original  # type: ignore[method-assign]
    # The pool drops the connections the cut broke (no use case covers the pool).
    await engine._db.pool.check()
    assert await scalar(engine, "select status from resume_queue") == "queued"
    assert await engine.worker.drain() == 1
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1
    done = await engine.runs.get(run.run_id)
    assert done is not None
    assert done.status == "completed"


async def test_a_finished_execution_is_replayed_not_run_again(engine: Engine) -> None:
    # What a crash after the ledger says "succeeded" and before the checkpoint leaves behind.
    run = await start_refund(engine)
    await _ledger_started(engine, run)
    recorded = {"refund_id": "rf_recorded", "order_id": "1001", "amount": 25.0}
    await engine.ledger.finish(
        run_id=run.run_id,
        call_id="refund-1001",
        status=ExecutionStatus.SUCCEEDED,
        result=recorded,
    )
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    await engine.worker.drain()
    assert await side_effects(engine, run.run_id, "refund-1001") == []
    graph = engine.registry.get("refund")
    state = await graph.aget_state({"configurable": {"thread_id": run.thread_id}})
    results = [
        m for m in state.values["messages"] if getattr(m, "tool_call_id", "") == "refund-1001"
    ]
    assert len(results) == 1
    assert "rf_recorded" in str(results[0].content)


class _DecidesOnCompletion:
    """A claimed job whose ``complete`` first runs ``before`` (the step has run, its trail is
    about to be written)."""

    def __init__(self, claimed: Any, before: Callable[[], Awaitable[None]]) -> None:
        self._claimed = claimed
        self._before = before

    @property
    def job(self) -> ResumeJob:
        return self._claimed.job  # type: ignore[no-any-return]

    async def complete(self, *args: Any) -> None:
        await self._before()
        await self._claimed.complete(*args)


async def test_a_claim_that_waited_for_the_thread_reads_the_trail_after_the_wait(
    engine: Engine,
) -> None:
    # Two calls of one turn, decided apart. While the first job's step ends, the second call
    # is decided and its job claimed: that claim waits on the thread's lock until the first
    # commits its trail. What the second resume checks (the run, the trail's next sequence
    # number, what still waits) must be read once the lock is granted, not from before the
    # wait, or its interception records reuse the first step's sequence numbers.
    run = await start_refund(engine, "Refund orders 1001 and 1002")
    requests = {r.call_id: r.id for r in await engine.requests.for_run(run.run_id)}
    await engine.decide_as_operator(requests["refund-1001"], "approve", principal="bob")
    tasks: list[asyncio.Task[None]] = []

    async def second_worker() -> None:
        async with engine.queue.claim() as waiting:
            assert waiting is not None
            assert waiting.job.request_id == requests["refund-1002"]
            await engine.runner.resume(waiting)

    async def decide_and_claim_the_second() -> None:
        await engine.decide_as_operator(
            requests["refund-1002"], "reject", principal="bob", reason="no"
        )
        tasks.append(asyncio.create_task(second_worker()))
        # The second claim waits on the thread's lock.
        await until(engine, "select count(*) > 0 from pg_locks where not granted")

    async with engine.queue.claim() as held:
        assert held is not None
        await engine.runner.resume(_DecidesOnCompletion(held, decide_and_claim_the_second))
    await tasks[0]
    done = await engine.runs.get(run.run_id)
    assert done is not None
    assert done.status == "completed"
    trail = await engine.audit.interceptions(run.run_id)
    sequences = [r["sequence"] for r in trail]
    # Unique and in order (an escalation still waiting is not recorded: its number is skipped).
    assert sequences == sorted(set(sequences)), sequences
    assert [r["point"] for r in trail][-3:] == ["post_model_call", "output", "agent_shutdown"]
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1
    assert await side_effects(engine, run.run_id, "refund-1002") == []
