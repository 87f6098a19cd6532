"""The ``ResumeQueue`` and ``ResumeChecks`` ports: a decision queues one resume job, one worker
claims it (holding its thread), and a claim that does not end cleanly leaves it queued."""

from __future__ import annotations

import asyncio
import functools
import uuid

import pytest

from approvals.model import DecisionKind, JobStatus, RequestStatus, ResumeJob, RunStatus
from approvals.ports import NewRun, Settlement
from tests.contracts.backends import Adapters
from tests.contracts.records import new_request, new_run, record, waiting_run
from tests.waiting import eventually


async def _decided(adapters: Adapters, run: NewRun, call_id: str = "call-1") -> str:
    """A request of ``run`` approved: its id (a resume job is queued for it)."""
    request, _ = await adapters.requests.open(new_request(run, call_id=call_id))
    await adapters.decisions.decide(
        request.id,
        kind=DecisionKind.APPROVE,
        principal="local:bob",
        reason=None,
        args=None,
        args_identity=None,
    )
    return request.id


async def test_a_decision_queues_one_job_that_one_worker_claims(adapters: Adapters) -> None:
    run = await waiting_run(adapters, graph="refund-graph")
    request_id = await _decided(adapters, run)

    async with adapters.queue.claim() as claimed:
        assert claimed is not None
        async with adapters.other_queue().claim() as second:
            assert second is None
        job = claimed.job
        await claimed.complete(
            JobStatus.DONE,
            settlement=Settlement(run_id=run.run_id, status=RunStatus.COMPLETED, answer="paid"),
        )

    assert (job.request_id, job.run_id, job.thread_id) == (request_id, run.run_id, run.thread_id)
    assert (job.call_id, job.graph, job.attempts) == ("call-1", "refund-graph", 0)
    settled = await adapters.runs.get(run.run_id)
    assert settled is not None
    assert (settled.status, settled.answer) == (RunStatus.COMPLETED, "paid")
    async with adapters.queue.claim() as nothing:
        assert nothing is None


async def test_racing_workers_claim_each_job_once(adapters: Adapters) -> None:
    runs = [await waiting_run(adapters) for _ in range(3)]
    for run in runs:
        await _decided(adapters, run)
    claimed: list[str] = []
    tried = 0
    everyone_tried = asyncio.Event()

    async def work() -> None:
        nonlocal tried
        async with adapters.other_queue().claim() as job:
            tried += 1
            if tried >= 6:
                everyone_tried.set()
            if job is not None:
                claimed.append(job.job.request_id)
                # Held until all six have tried to claim: they all race for the jobs.
                await asyncio.wait_for(everyone_tried.wait(), 30)
                await job.complete(JobStatus.DONE)

    await asyncio.gather(*(work() for _ in range(6)))

    assert len(claimed) == len(set(claimed))
    assert 1 <= len(claimed) <= 3
    for _ in range(3):
        await work()
    assert len(claimed) == len(set(claimed)) == 3


async def test_the_oldest_job_is_claimed_first(adapters: Adapters) -> None:
    first = await _decided(adapters, await waiting_run(adapters))
    second = await _decided(adapters, await waiting_run(adapters))

    async with adapters.queue.claim() as claimed:
        assert claimed is not None
        assert claimed.job.request_id == first
        async with adapters.other_queue().claim() as next_one:
            assert next_one is not None
            assert next_one.job.request_id == second


async def test_a_claim_skips_the_jobs_of_graphs_set_aside(adapters: Adapters) -> None:
    refund = await waiting_run(adapters)
    await _decided(adapters, refund)
    mail = await waiting_run(adapters, graph="email")
    await _decided(adapters, mail)

    async with adapters.queue.claim(["refund"]) as claimed:
        assert claimed is not None
        assert claimed.job.run_id == mail.run_id  # the refund's job is older
    async with adapters.queue.claim(["refund", "email"]) as nothing:
        assert nothing is None
    async with adapters.queue.claim() as oldest:
        assert oldest is not None
        assert oldest.job.run_id == refund.run_id


async def test_a_claim_waits_for_its_threads_step(adapters: Adapters) -> None:
    run = await waiting_run(adapters)
    await _decided(adapters, run)
    entered = asyncio.Event()
    release = asyncio.Event()
    step = new_run(thread_id=run.thread_id, input={})

    async def hold() -> None:
        async with adapters.runs.begin(step):
            entered.set()
            await release.wait()

    async def claim() -> None:
        async with adapters.queue.claim() as claimed:
            assert claimed is not None

    holder = asyncio.create_task(hold())
    await entered.wait()
    claimer = asyncio.create_task(claim())
    await eventually(lambda: adapters.thread_waiters(run.thread_id), what="the claim waiting")
    assert not claimer.done()
    release.set()
    await holder
    await asyncio.wait_for(claimer, 10)


async def test_a_claim_that_waited_for_its_threads_step_reads_the_steps_settlement(
    adapters: Adapters,
) -> None:
    # The step's settlement and the thread's release are one statement: released before its
    # commit, a waiting claim read the run as the step found it (still running, its trail's next
    # sequence 0), and the resumed step numbered its records from 0 again. Many rounds: the
    # window is narrow.
    async def claim(seen: list[tuple[RunStatus | None, int]]) -> None:
        async with adapters.queue.claim() as claimed:
            assert claimed is not None
            check = await adapters.checks.begin(claimed.job)
            seen.append((check.run_status, check.next_sequence))
            await claimed.complete(JobStatus.SKIPPED, "read")

    for _ in range(30):
        step = new_run(input={})
        seen: list[tuple[RunStatus | None, int]] = []
        async with adapters.runs.begin(step) as lease:
            request_id = await _decided(adapters, step)
            claimer = asyncio.create_task(claim(seen))
            await eventually(
                functools.partial(adapters.thread_waiters, step.thread_id),
                what="the claim waiting for the thread",
            )
            lease.settle(
                Settlement(
                    run_id=step.run_id,
                    status=RunStatus.WAITING,
                    waiting_on=((request_id, "interrupt-1"),),
                    records=(record(0), record(1)),
                )
            )
        await asyncio.wait_for(claimer, 10)
        assert seen == [(RunStatus.WAITING, 2)]


async def test_a_claim_that_raises_leaves_its_job_queued(adapters: Adapters) -> None:
    run = await waiting_run(adapters)
    await _decided(adapters, run)

    with pytest.raises(RuntimeError):
        await _complete_then_crash(adapters)

    async with adapters.queue.claim() as again:
        assert again is not None
        assert again.job.attempts == 0
    settled = await adapters.runs.get(run.run_id)
    assert settled is not None
    assert settled.status is RunStatus.WAITING


async def _complete_then_crash(adapters: Adapters) -> None:
    async with adapters.queue.claim() as claimed:
        assert claimed is not None
        await claimed.complete(
            JobStatus.DONE,
            settlement=Settlement(run_id=claimed.job.run_id, status=RunStatus.FAILED),
        )
        raise RuntimeError("the worker died")


async def test_a_claim_left_without_completing_leaves_its_job_queued(adapters: Adapters) -> None:
    request_id = await _decided(adapters, await waiting_run(adapters))

    async with adapters.queue.claim() as claimed:
        assert claimed is not None

    async with adapters.queue.claim() as again:
        assert again is not None
        assert again.job.request_id == request_id


async def test_a_job_finished_without_a_settlement_leaves_the_run_as_it_was(
    adapters: Adapters,
) -> None:
    run = await waiting_run(adapters)
    await _decided(adapters, run)

    async with adapters.queue.claim() as claimed:
        assert claimed is not None
        await claimed.complete(JobStatus.SKIPPED, error="run cancelled")

    after = await adapters.runs.get(run.run_id)
    assert after is not None
    assert after.status is RunStatus.WAITING
    async with adapters.queue.claim() as nothing:
        assert nothing is None


async def test_a_settlement_without_an_answer_keeps_the_runs_answer(adapters: Adapters) -> None:
    run = new_run(input={})
    async with adapters.runs.begin(run) as lease:
        lease.settle(Settlement(run_id=run.run_id, status=RunStatus.WAITING, answer="so far"))
    await _decided(adapters, run)

    async with adapters.queue.claim() as claimed:
        assert claimed is not None
        await claimed.complete(
            JobStatus.FAILED,
            error="boom",
            settlement=Settlement(run_id=run.run_id, status=RunStatus.FAILED, error="boom"),
        )

    after = await adapters.runs.get(run.run_id)
    assert after is not None
    assert (after.status, after.answer, after.error) == (RunStatus.FAILED, "so far", "boom")


async def test_a_listening_worker_is_woken_by_a_new_job(adapters: Adapters) -> None:
    assert not await adapters.queue.wait(0.05)
    await _decided(adapters, await waiting_run(adapters))

    assert await adapters.queue.wait(5)


async def test_a_resume_check_reads_the_run_and_its_trail(adapters: Adapters) -> None:
    run = new_run(input={"message": "refund 1001", "context": {"shop": "eu"}})
    async with adapters.runs.begin(run) as lease:
        lease.settle(
            Settlement(
                run_id=run.run_id,
                status=RunStatus.WAITING,
                records=(record(0), record(1), record(2)),
            )
        )
    await _decided(adapters, run)

    async with adapters.queue.claim() as claimed:
        assert claimed is not None
        check = await adapters.checks.begin(claimed.job)

    assert (check.run_status, check.next_sequence, check.interrupt_id) == (
        RunStatus.WAITING,
        3,
        None,
    )
    # What the resume acts with, from the same read: no second look at the run's row.
    assert check.started_by == "local:alice"
    assert check.run_input == {"message": "refund 1001", "context": {"shop": "eu"}}


async def test_a_resume_check_of_an_unknown_run_finds_nothing(adapters: Adapters) -> None:
    job = ResumeJob(
        id=0,
        request_id=str(uuid.uuid4()),
        decision_id=str(uuid.uuid4()),
        run_id=str(uuid.uuid4()),
        thread_id="thread-none",
        call_id="call-1",
        graph="refund",
        attempts=0,
    )

    check = await adapters.checks.begin(job)

    assert (check.run_status, check.next_sequence, check.interrupt_id) == (None, 0, None)
    assert (check.started_by, check.run_input) == ("", {})


async def test_a_resume_check_carries_the_decided_request_and_its_decision(
    adapters: Adapters,
) -> None:
    run = await waiting_run(adapters)
    request_id = await _decided(adapters, run)

    async with adapters.queue.claim() as claimed:
        assert claimed is not None
        check = await adapters.checks.begin(claimed.job)

    # What opening the request again would return: the resumed call reads neither again.
    assert check.decided is not None
    request, decision = check.decided
    assert (request, decision) == await adapters.requests.open(new_request(run))
    assert (request.id, request.status, decision.kind) == (
        request_id,
        RequestStatus.APPROVED,
        DecisionKind.APPROVE,
    )


async def test_a_resume_check_of_a_request_not_decided_carries_none(adapters: Adapters) -> None:
    run = await waiting_run(adapters)
    request, _ = await adapters.requests.open(new_request(run))
    job = ResumeJob(
        id=0,
        request_id=request.id,
        decision_id=str(uuid.uuid4()),
        run_id=run.run_id,
        thread_id=run.thread_id,
        call_id="call-1",
        graph="refund",
        attempts=0,
    )

    check = await adapters.checks.begin(job)

    assert check.decided is None
