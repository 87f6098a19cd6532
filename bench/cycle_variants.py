"""One cycle of each variant of ``bench/approval_cycle.py``: bare LangGraph, the floors (bare plus
the contract's commits, and the cycle's emissions), and ours; and the check of what the cycles
left in the database."""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

from agent_hooks import InterceptionEmitter, Verdict

from bench.cycle_agent import (
    APPROVER,
    BARE_APPROVAL,
    GRAPH,
    MESSAGE,
    REQUESTER,
    bare_run,
    check_bare,
)
from bench.cycle_profile import phase
from bench.cycle_stats import Sample
from bench.cycle_workers import TrackingRunner, WorkerTasks
from graphs.hooks.emitter import JsonContext, emitter_class


async def bare_cycle(graph: Any, durability: str = "async") -> Sample:
    _, config, payload = bare_run()
    t0 = time.perf_counter()
    async with phase("bare: invoke to interrupt"):
        paused = await graph.ainvoke(payload, config, durability=durability)
    t1 = time.perf_counter()
    async with phase("bare: resume to end"):
        done = await graph.ainvoke(BARE_APPROVAL, config, durability=durability)
    t2 = time.perf_counter()
    check_bare("bare cycle", paused, done)
    return Sample(t2 - t0, {"invoke": t1 - t0, "resume": t2 - t1})


# The durable writes the engine's own contract adds to a cycle, each its own commit: the
# pending-call record, the decision (request, decision row, audit event, queue row), the
# worker's claim and close of the job, and the ledger row's start and finish.
REQUIRED_COMMITS = 5


async def floor_cycle(graph: Any, pool: Any, durability: str = "async") -> Sample:
    """The bare cycle plus ``REQUIRED_COMMITS`` one-row commits and nothing else: what no
    implementation of the contract on this database can beat, whatever its Python costs."""
    sample = await bare_cycle(graph, durability)
    t0 = time.perf_counter()
    for _ in range(REQUIRED_COMMITS):
        async with pool.connection() as conn:
            await conn.execute("INSERT INTO bench_floor DEFAULT VALUES")
    extra = time.perf_counter() - t0
    return Sample(sample.total + extra, {**sample.phases, "commits": extra})


class AllowAll:
    """The cheapest policy there is: the floor+emit variant's only interceptor. It reads the
    context only, and says so, as the policy engine does."""

    context_read_only = True

    def intercept(self, ctx: dict[str, Any], /) -> Verdict:
        return Verdict.allow()


async def floor_emit_cycle(
    graph: Any, pool: Any, contexts: list[dict[str, Any]], durability: str = "async"
) -> Sample:
    """The floor plus one cycle's interception contexts through the engine's emitter. The
    emitter and fresh copies of the contexts are made before timing (a host builds its
    contexts anyway); only the emissions are timed."""
    sample = await floor_cycle(graph, pool, durability)
    extra = await emit_contexts(contexts)
    return Sample(sample.total + extra, {**sample.phases, "emit": extra})


async def emit_contexts(contexts: list[dict[str, Any]]) -> float:
    """Seconds taken to emit fresh copies of ``contexts`` through the engine's emitter, with
    one allow-everything interceptor (the copies and the emitter made before timing)."""
    emitter = emitter_class()()
    emitter.register(AllowAll(), name="AllowAll")
    fresh = [JsonContext(copy.deepcopy(ctx)) for ctx in contexts]
    t0 = time.perf_counter()
    for ctx in fresh:
        await emitter.emit_unchecked(ctx)
    return time.perf_counter() - t0


async def captured_contexts(engine: Any, worker: Any, tracker: TrackingRunner) -> list[Any]:
    """The interception contexts one of our cycles emits, as each emission received them."""
    seen: list[dict[str, Any]] = []
    cls = emitter_class()
    original = cls.emit_unchecked

    async def recording(self: InterceptionEmitter, ctx: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(copy.deepcopy(dict(ctx)))
        return await original(self, ctx, *args, **kwargs)

    cls.emit_unchecked = recording  # type: ignore[method-assign]
    try:
        await ours_cycle(engine, worker, tracker)
    finally:
        cls.emit_unchecked = original  # type: ignore[method-assign]
    return seen


async def ours_cycle(
    engine: Any, worker: Any, tracker: TrackingRunner, workers: WorkerTasks | None = None
) -> Sample:
    t0 = time.perf_counter()
    async with phase("ours: start (pause, record)"):
        started = await engine.runner.start(GRAPH, {"message": MESSAGE}, principal=REQUESTER)
    t1 = time.perf_counter()
    if started.status != "waiting" or len(started.pending) != 1:
        raise RuntimeError(f"run did not pause: {started}")
    resumed = tracker.expect(started.run_id)
    async with phase("ours: decide (consume, queue)"):
        await engine.decide_as_operator(started.pending[0], "approve", principal=APPROVER)
    t2 = time.perf_counter()
    async with phase("ours: resume (claim .. execute)"):
        if workers is not None:
            workers.wake()
            outcome = await workers.outcome(resumed, 120)
        else:
            # At c=16 another lane's process_one may claim this lane's job, or this one may
            # find the queue empty for the moment: claim until this run has been resumed.
            while not resumed.done():
                if not await worker.process_one():
                    await asyncio.wait({resumed}, timeout=0.002)
            outcome = resumed.result()
    t3 = time.perf_counter()
    if (
        outcome is None
        or outcome.status != "completed"
        or not str(outcome.answer).startswith("Refunded")
    ):
        raise RuntimeError(f"run did not complete: {outcome}")
    return Sample(t3 - t0, {"start": t1 - t0, "decide": t2 - t1, "resume": t3 - t2})


async def count_rows(engine: Any) -> dict[str, int]:
    async with engine.connection() as conn:
        cur = await conn.execute(
            "SELECT (SELECT count(*) FROM demo_side_effects) AS effects,"
            " (SELECT count(*) FROM (SELECT 1 FROM demo_side_effects GROUP BY run_id, call_id"
            "   HAVING count(*) > 1) d) AS dupes,"
            " (SELECT count(*) FROM resume_queue WHERE status = 'queued') AS queued"
        )
        row = await cur.fetchone()
    return {k: int(v) for k, v in row.items()}
