"""The *statements* floor of ``bench/approval_cycle.py``: bare LangGraph's cycle with every
durable statement the engine's own cycle sends around it, through the engine's storage layer,
and the cycle's emissions, but none of the engine's orchestration.

The floor of ``approval_cycle`` (bare plus five one-row commits) is what the contract needs at
the least; this one is what the engine's statements, as its schema writes them, cost: the run
and its thread lock, the pending call's record, the pause's settlement (with the step's
interception records and node updates), the request's read and the decision, the claim with
its thread lock, the resume check, the ledger's start and finish, and the job's close with the
run's settlement. Each is the engine's own call (``PgRuns``, ``PgApprovalRequests``,
``PgDecisions``, ``PgResumeQueue``, ``PgResumeChecks``, ``PgToolLedger``) with the arguments one
of our cycles gave it, captured from a real cycle (``capture``), under fresh run and request
ids. What ours takes beyond this floor is the engine's Python between its statements (the
runner, the gate, the resolver, the tool step) and LangGraph's ``durability="sync"``, which
bare does not pay.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from approvals.identity import idempotency_key
from approvals.model import DecisionKind, JobStatus
from approvals.ports import NewRequest, NewRun, Settlement
from bench.cycle_agent import (
    APPROVER,
    BARE_APPROVAL,
    GRAPH,
    MESSAGE,
    REQUESTER,
    bare_run,
    check_bare,
)
from bench.cycle_stats import Sample
from storage.queue import PgClaimedJob
from storage.runs import PgRunLease


@dataclass(frozen=True)
class CycleWrites:
    """What one of our cycles gave the engine's storage, to be written again."""

    request: NewRequest
    pause: Settlement
    begin: dict[str, Any]
    finish: dict[str, Any]
    end: Settlement


class Captured(dict[str, Any]):
    """The arguments seen so far, by ``CycleWrites`` field."""

    def complete(self) -> CycleWrites:
        names = [f.name for f in dataclasses.fields(CycleWrites)]
        if missing := [name for name in names if self.get(name) is None]:
            raise RuntimeError(f"the captured cycle did not write: {', '.join(missing)}")
        return CycleWrites(**{name: self[name] for name in names})


@contextmanager
def capture(engine: Any) -> Iterator[Captured]:
    """Record the arguments of the engine's storage calls made inside the block (one cycle)."""
    writes = Captured()
    requests, ledger = engine.requests, engine.ledger
    open_request, begin, finish = requests.open, ledger.begin, ledger.finish
    settle, complete = PgRunLease.settle, PgClaimedJob.complete

    async def opening(new: NewRequest) -> Any:
        writes["request"] = new
        return await open_request(new)

    async def beginning(**kwargs: Any) -> Any:
        writes["begin"] = kwargs
        return await begin(**kwargs)

    async def finishing(**kwargs: Any) -> Any:
        writes["finish"] = kwargs
        return await finish(**kwargs)

    def settling(self: PgRunLease, settlement: Settlement) -> None:
        writes["pause"] = settlement
        settle(self, settlement)

    async def completing(
        self: PgClaimedJob, status: JobStatus, error: str | None = None, settlement: Any = None
    ) -> None:
        writes["end"] = settlement
        await complete(self, status, error, settlement)

    requests.open, ledger.begin, ledger.finish = opening, beginning, finishing
    PgRunLease.settle, PgClaimedJob.complete = settling, completing  # type: ignore[method-assign]
    try:
        yield writes
    finally:
        del requests.open, ledger.begin, ledger.finish
        PgRunLease.settle, PgClaimedJob.complete = settle, complete  # type: ignore[method-assign]


async def statements_cycle(
    engine: Any,
    checks: Any,
    bare: Any,
    writes: CycleWrites,
    emit: Callable[[], Awaitable[float]],
    durability: str,
) -> Sample:
    """One bare cycle inside the engine's statements, then the emissions (``emit``: their
    seconds)."""
    run_id, config, payload = bare_run()
    new_run = NewRun(
        run_id=run_id,
        thread_id=run_id,
        graph=GRAPH,
        started_by=REQUESTER,
        input={"message": MESSAGE},
        new_thread=True,
    )
    t0 = time.perf_counter()
    async with engine.runs.begin(new_run) as lease:
        paused = await bare.ainvoke(payload, config, durability=durability)
        request, _ = await engine.requests.open(
            dataclasses.replace(writes.request, run_id=run_id, thread_id=run_id)
        )
        interrupt_id = writes.pause.waiting_on[0][1] if writes.pause.waiting_on else "interrupt"
        lease.settle(
            dataclasses.replace(
                writes.pause, run_id=run_id, waiting_on=((request.id, interrupt_id),)
            )
        )
    t1 = time.perf_counter()
    read = await engine.requests.get(request.id)
    await engine.decisions.decide(
        read.id,
        kind=DecisionKind.APPROVE,
        principal=APPROVER,
        reason=None,
        args=None,
        args_identity=None,
        override_by=APPROVER,
    )
    t2 = time.perf_counter()
    while True:
        # At concurrency 16 another lane may hold this lane's job: any queued job will do
        # (its run is settled below, under its own thread's lock), as for ours.
        async with engine.queue.claim() as claimed:
            if claimed is not None:
                await checks.begin(claimed.job)
                call_id = writes.begin["call_id"]
                key = idempotency_key(run_id=run_id, call_id=call_id)
                await engine.ledger.begin(**{**writes.begin, "run_id": run_id, "key": key})
                done = await bare.ainvoke(BARE_APPROVAL, config, durability=durability)
                await engine.ledger.finish(**{**writes.finish, "run_id": run_id})
                await claimed.complete(
                    JobStatus.DONE,
                    settlement=dataclasses.replace(writes.end, run_id=claimed.job.run_id),
                )
                break
        await asyncio.sleep(0.001)
    t3 = time.perf_counter()
    emitted = await emit()
    check_bare("statements cycle", paused, done)
    return Sample(
        t3 - t0 + emitted,
        {"start": t1 - t0, "decide": t2 - t1, "resume": t3 - t2, "emit": emitted},
    )
