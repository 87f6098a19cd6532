"""Attacks on an operator's retry of a waiting run's failed resumes (``Engine.retry_run``): two
failed calls of one step, a retry racing a cancel or a sibling's decision, a rejected call's
resume retried, a call whose tool ran or whose outcome is unknown, a job failing again, an
OpenAI Agents SDK run. Whatever the order, a call runs only with consent and at most once, the
audit chain verifies, and the queue's state says what happened."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from approvals.errors import NothingToRetry
from approvals.model import JobStatus
from tests.integration.helpers import (
    closing_fails_once,
    drain_failing_after_the_step,
    events_of,
    poisoned,
    run_status,
    scalar,
    side_effects,
    start_refund,
    verified,
)
from web.engine import Engine


async def jobs(engine: Engine, run_id: str) -> list[dict[str, Any]]:
    async with engine.connection() as conn:
        cur = await conn.execute(
            "SELECT q.status, q.attempts, q.last_error, a.call_id FROM resume_queue q"
            " JOIN approval_requests a ON a.id = q.request_id WHERE q.run_id = %s ORDER BY q.id",
            (run_id,),
        )
        return list(await cur.fetchall())


async def failed_count(engine: Engine) -> int:
    snapshot = await engine.operations.metrics()
    return int(snapshot.jobs.get("failed", 0))


async def requests_by_call(engine: Engine, run: Any) -> dict[str, str]:
    found = {}
    for request_id in run.pending:
        request = await engine.requests.get(request_id)
        assert request is not None
        found[request.call_id] = request.id
    return found


async def test_two_failed_calls_of_one_step_each_run_once_after_a_retry(engine: Engine) -> None:
    started = await start_refund(engine, "refund 1001 1002")
    calls = await requests_by_call(engine, started)
    assert set(calls) == {"refund-1001", "refund-1002"}
    for request_id in calls.values():
        await engine.decide_as_operator(request_id, "approve", principal="bob")
    with poisoned(engine, started.run_id):
        assert await engine.worker.drain() == 2
    assert [j["status"] for j in await jobs(engine, started.run_id)] == ["failed", "failed"]
    assert await failed_count(engine) == 2

    retried = await engine.retry_run(started.run_id, by="olga", reason="fixed")
    assert retried.jobs == 2
    assert sorted(
        e["call_id"] for e in await events_of(engine, started.run_id, "resume.retried")
    ) == [
        "refund-1001",
        "refund-1002",
    ]
    assert await failed_count(engine) == 0
    assert await engine.worker.drain() == 2
    assert await run_status(engine, started.run_id) == "completed"
    for call in calls:
        assert len(await side_effects(engine, started.run_id, call)) == 1
    assert {j["status"] for j in await jobs(engine, started.run_id)} <= {"done", "skipped"}
    assert [j["attempts"] for j in await jobs(engine, started.run_id)] == [2, 2]
    await verified(engine)


async def test_a_rejected_calls_failed_resume_retried_never_runs_the_call(engine: Engine) -> None:
    started = await start_refund(engine)
    await engine.decide_as_operator(started.pending[0], "reject", principal="bob", reason="no")
    with poisoned(engine, started.run_id):
        assert await engine.worker.drain() == 1
    await engine.retry_run(started.run_id, by="olga")
    assert await engine.worker.drain() == 1
    assert await run_status(engine, started.run_id) == "completed"
    assert await side_effects(engine, started.run_id, "refund-1001") == []
    assert (
        await scalar(engine, "SELECT count(*) FROM tool_executions WHERE tool = 'issue_refund'")
        == 0
    )
    await verified(engine)


async def test_a_job_failing_again_is_retried_again_and_its_attempts_grow(engine: Engine) -> None:
    started = await start_refund(engine)
    await engine.decide_as_operator(started.pending[0], "approve", principal="bob")
    for _ in range(2):
        with poisoned(engine, started.run_id):
            assert await engine.worker.drain() == 1
        [job] = await jobs(engine, started.run_id)
        assert job["status"] == JobStatus.FAILED
        assert await run_status(engine, started.run_id) == "waiting"
        assert await failed_count(engine) == 1
        await engine.retry_run(started.run_id, by="olga", reason="try again")
    assert await engine.worker.drain() == 1
    [job] = await jobs(engine, started.run_id)
    assert (job["status"], job["attempts"]) == ("done", 3)
    assert len(await events_of(engine, started.run_id, "resume.failed")) == 2
    assert len(await events_of(engine, started.run_id, "resume.retried")) == 2
    assert len(await side_effects(engine, started.run_id, "refund-1001")) == 1
    await verified(engine)


async def test_a_call_whose_outcome_is_unknown_is_never_run_again_by_a_retry(
    engine: Engine,
) -> None:
    """A worker died inside the refund (its ledger row is left ``started``), then the next
    resume failed: the retried resume must not make the refund: it asks whether it took effect
    (``outcome_unknown``), and the run waits on that question."""
    from approvals.identity import call_identity, idempotency_key

    started = await start_refund(engine)
    args = {"amount": 25.0, "order_id": "1001", "reason": "customer request"}
    await engine.ledger.begin(
        run_id=started.run_id,
        call_id="refund-1001",
        tool="issue_refund",
        key=idempotency_key(run_id=started.run_id, call_id="refund-1001"),
        args_identity=call_identity(
            run_id=started.run_id, call_id="refund-1001", tool="issue_refund", args=args
        ),
    )
    await engine.decide_as_operator(started.pending[0], "approve", principal="bob")
    with poisoned(engine, started.run_id):
        assert await engine.worker.drain() == 1
    await engine.retry_run(started.run_id, by="olga")
    assert await engine.worker.drain() == 1
    assert await side_effects(engine, started.run_id, "refund-1001") == []
    [execution] = [
        e for e in await engine.ledger.for_run(started.run_id) if e.call_id == "refund-1001"
    ]
    assert execution.status == "outcome_unknown"
    assert await run_status(engine, started.run_id) == "waiting"
    reconcile = await scalar(
        engine,
        "SELECT count(*) FROM approval_requests WHERE run_id = %s AND status = 'pending'"
        " AND reason LIKE 'outcome unknown%%'",
        started.run_id,
    )
    assert reconcile == 1
    # Nothing of it failed now: a second retry has nothing to queue.
    with pytest.raises(NothingToRetry):
        await engine.retry_run(started.run_id, by="olga")
    await verified(engine)


async def test_a_retry_is_a_resume_a_stream_of_the_run_can_follow(engine: Engine) -> None:
    """A stream of a waiting run closes; a queued resume (``resuming``) is what tells a client
    to follow the next step. A retry queues one, so it must say so too."""
    started = await start_refund(engine)
    await engine.decide_as_operator(started.pending[0], "approve", principal="bob")
    with poisoned(engine, started.run_id):
        assert await engine.worker.drain() == 1
    seen = await engine.run_events.after(started.run_id, 0)
    last = seen[-1]["id"]
    await engine.retry_run(started.run_id, by="olga")
    after = await engine.run_events.after(started.run_id, last)
    assert [e["kind"] for e in after] == ["resuming"]


async def test_a_retry_racing_a_cancel_never_resumes_a_cancelled_run(engine: Engine) -> None:
    for n in range(6):
        started = await start_refund(engine, f"refund 1001 #{n}")
        await engine.decide_as_operator(started.pending[0], "approve", principal="bob")
        with poisoned(engine, started.run_id):
            assert await engine.worker.drain() == 1
        retry, cancel = await asyncio.gather(
            engine.retry_run(started.run_id, by="olga", reason="fixed"),
            engine.cancel_run(started.run_id, by="olga", reason="withdrawn"),
            return_exceptions=True,
        )
        assert not isinstance(cancel, BaseException), cancel
        assert not isinstance(retry, BaseException) or isinstance(retry, NothingToRetry), retry
        await engine.worker.drain()
        assert await run_status(engine, started.run_id) == "cancelled"
        assert await side_effects(engine, started.run_id, "refund-1001") == []
        [job] = await jobs(engine, started.run_id)
        assert job["status"] in ("failed", "skipped")
    await verified(engine)


async def first_of_two_failed(engine: Engine, message: str) -> tuple[Any, dict[str, str]]:
    """A run waiting on two refunds, the first approved and its resume failed (the second still
    pending): the run and its request ids by call."""
    started = await start_refund(engine, message)
    calls = await requests_by_call(engine, started)
    await engine.decide_as_operator(calls["refund-1001"], "approve", principal="bob")
    with poisoned(engine, started.run_id):
        assert await engine.worker.drain() == 1
    return started, calls


async def test_a_retry_racing_a_siblings_decision_runs_each_call_once(engine: Engine) -> None:
    for n in range(4):
        started, calls = await first_of_two_failed(engine, f"refund 1001 1002 #{n}")
        outcomes = await asyncio.gather(
            engine.retry_run(started.run_id, by="olga"),
            engine.decide_as_operator(calls["refund-1002"], "approve", principal="carol"),
            engine.worker.drain(),
            return_exceptions=True,
        )
        assert not any(
            isinstance(o, BaseException) and not isinstance(o, NothingToRetry) for o in outcomes
        ), outcomes
        await engine.worker.drain()
        assert await run_status(engine, started.run_id) == "completed"
        for call in calls:
            assert len(await side_effects(engine, started.run_id, call)) == 1
    await verified(engine)


async def test_a_retry_after_a_sibling_finished_the_run_is_refused(engine: Engine) -> None:
    """1001's resume failed; 1002's decision resumed the step, and both calls ran (1001 from
    its stored decision). The run ended: nothing is queued again, nothing runs twice."""
    started = await start_refund(engine, "refund 1001 1002")
    calls = await requests_by_call(engine, started)
    await engine.decide_as_operator(calls["refund-1001"], "approve", principal="bob")
    with poisoned(engine, started.run_id):
        assert await engine.worker.drain() == 1
    await engine.decide_as_operator(calls["refund-1002"], "approve", principal="bob")
    assert await engine.worker.drain() == 1
    assert await run_status(engine, started.run_id) == "completed"
    with pytest.raises(NothingToRetry):
        await engine.retry_run(started.run_id, by="olga")
    assert await engine.worker.drain() == 0
    for call in calls:
        assert len(await side_effects(engine, started.run_id, call)) == 1
    await verified(engine)


async def test_an_openai_runs_failed_resume_after_its_tool_ran_is_not_run_again(
    engine: Engine,
) -> None:
    run = await engine.runner.start("refund_openai", {"message": "refund 1001"}, principal="al")
    assert run.status == "waiting"
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    await drain_failing_after_the_step(engine)
    [job] = await jobs(engine, run.run_id)
    assert job["status"] == JobStatus.FAILED
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1

    await engine.retry_run(run.run_id, by="olga")
    assert await engine.worker.drain() == 1
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1
    assert await run_status(engine, run.run_id) == "completed"
    await verified(engine)


async def test_an_openai_runs_poisoned_resume_is_retried_and_runs_once(engine: Engine) -> None:
    run = await engine.runner.start("refund_openai", {"message": "refund 1001"}, principal="al")
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    with poisoned(engine, run.run_id):
        assert await engine.worker.drain() == 1
    await engine.retry_run(run.run_id, by="olga")
    assert await engine.worker.drain() == 1
    assert await run_status(engine, run.run_id) == "completed"
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1
    await verified(engine)


HELD = ("nested_escalate_input", "tool_node_escalate_input")


@pytest.fixture
async def held_engine(database_url: str, tmp_path: Any) -> Any:
    from web.engine import open_engine
    from web.settings import Settings

    settings = Settings(
        database_url=database_url,
        config_file=tmp_path / "none.toml",
        graphs={n: f"tests.integration.middleware_graphs:{n}" for n in HELD},
    )
    async with open_engine(database_url, settings) as opened:
        yield opened


@pytest.mark.parametrize("graph", HELD)
async def test_a_held_inputs_resume_that_failed_after_the_graph_started_is_not_started_again(
    held_engine: Engine, graph: str
) -> None:
    """The approved input started the graph (its refund now waits), then closing the job
    raised: the retried job must not hand the message to the graph a second time."""
    engine = held_engine
    out = await engine.runner.start(graph, {"message": "refund 1005 25"}, principal="alice")
    [review] = [r for r in await engine.requests.for_run(out.run_id) if r.status == "pending"]
    await engine.decide_as_operator(review.id, "approve", principal="bob")
    await drain_failing_after_the_step(engine)
    state = await engine.registry.get(graph).aget_state(
        {"configurable": {"thread_id": out.thread_id}}
    )
    before = [m for m in state.values.get("messages") or [] if m.type == "human"]
    assert len(before) == 1
    await engine.retry_run(out.run_id, by="olga")
    assert await engine.worker.drain() == 1
    state = await engine.registry.get(graph).aget_state(
        {"configurable": {"thread_id": out.thread_id}}
    )
    after = [m for m in state.values.get("messages") or [] if m.type == "human"]
    assert len(after) == 1, after


async def test_a_retry_racing_the_expiry_of_a_sibling_runs_only_the_approved_call(
    engine: Engine,
) -> None:
    for n in range(4):
        started, calls = await first_of_two_failed(engine, f"refund 1001 1002 #{n}")
        async with engine.connection() as conn:
            await conn.execute(
                "UPDATE approval_requests SET expires_at = now() - interval '1 second'"
                " WHERE id = %s",
                (calls["refund-1002"],),
            )
        outcomes = await asyncio.gather(
            engine.retry_run(started.run_id, by="olga"),
            engine.expiry.sweep(),
            return_exceptions=True,
        )
        assert not any(isinstance(o, BaseException) for o in outcomes), outcomes
        await engine.worker.drain()
        assert await run_status(engine, started.run_id) == "completed"
        assert len(await side_effects(engine, started.run_id, "refund-1001")) == 1
        assert await side_effects(engine, started.run_id, "refund-1002") == []
    await verified(engine)


@pytest.mark.parametrize("graph", ["refund", "refund_openai"])
@pytest.mark.parametrize("sibling_first", [False, True])
async def test_a_stale_job_retried_after_its_step_went_on_runs_nothing_twice(
    engine: Engine, graph: str, sibling_first: bool
) -> None:
    """1001's step ran (its refund made, the run now waits on 1002), then closing its job
    raised. Retried before or after 1002 is rejected, no refund is made twice or unasked."""
    run = await engine.runner.start(graph, {"message": "refund 1001 and 1002"}, principal="al")
    calls = await requests_by_call(engine, run)
    await engine.decide_as_operator(calls["refund-1001"], "approve", principal="bob")
    with closing_fails_once() as raised:
        assert await engine.worker.drain() == 1
    assert raised
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1
    assert await run_status(engine, run.run_id) == "waiting"
    if sibling_first:
        await engine.decide_as_operator(calls["refund-1002"], "reject", principal="c", reason="no")
        await engine.worker.drain()
    try:
        await engine.retry_run(run.run_id, by="olga")
    except NothingToRetry:
        assert sibling_first
    await engine.worker.drain()
    if not sibling_first:
        assert await run_status(engine, run.run_id) == "waiting"
        await engine.decide_as_operator(calls["refund-1002"], "reject", principal="c", reason="no")
        await engine.worker.drain()
    assert await run_status(engine, run.run_id) == "completed"
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1
    assert await side_effects(engine, run.run_id, "refund-1002") == []
    await verified(engine)


async def test_an_edited_calls_failed_resume_retried_runs_the_edited_arguments_once(
    engine: Engine,
) -> None:
    started = await start_refund(engine)
    edited = {"order_id": "1001", "amount": 10.0, "reason": "partial"}
    await engine.decide_as_operator(started.pending[0], "approve", principal="bob", args=edited)
    with poisoned(engine, started.run_id):
        assert await engine.worker.drain() == 1
    await engine.retry_run(started.run_id, by="olga")
    assert await engine.worker.drain() == 1
    assert await run_status(engine, started.run_id) == "completed"
    effects = await side_effects(engine, started.run_id, "refund-1001")
    assert [e["args"] for e in effects] == [edited]
    await verified(engine)


@pytest.mark.parametrize("verdict", ["approve", "reject"])
async def test_a_held_inputs_poisoned_resume_retried_starts_the_graph_only_if_approved(
    held_engine: Engine, verdict: str
) -> None:
    engine = held_engine
    graph = "tool_node_escalate_input"
    out = await engine.runner.start(graph, {"message": "refund 1005 25"}, principal="alice")
    [review] = [r for r in await engine.requests.for_run(out.run_id) if r.status == "pending"]
    await engine.decide_as_operator(review.id, verdict, principal="bob", reason="r")
    with poisoned(engine, out.run_id):
        assert await engine.worker.drain() == 1
    await engine.retry_run(out.run_id, by="olga")
    assert await engine.worker.drain() == 1
    state = await engine.registry.get(graph).aget_state(
        {"configurable": {"thread_id": out.thread_id}}
    )
    humans = [m for m in state.values.get("messages") or [] if m.type == "human"]
    if verdict == "approve":
        assert len(humans) == 1
        assert await run_status(engine, out.run_id) == "waiting"  # on its refund
    else:
        assert humans == []
        assert await run_status(engine, out.run_id) == "blocked"
    assert await side_effects(engine, out.run_id, "refund-1005") == []
    await verified(engine)
