"""The bench's worker coroutines (``--resume-path workers``): a worker that dies fails the
lane waiting on its run at once, with the worker's error, instead of a two-minute timeout
that says nothing of why; and the bench counts what was left queued only once every claim has
ended."""

from __future__ import annotations

import asyncio

import pytest

from bench.cycle_workers import WorkerTasks
from tests.waiting import ready_tasks_ran


class Broken:
    """A worker whose claim fails as a lost database connection would."""

    async def process_one(self) -> bool:
        raise ConnectionResetError("the worker lost its connection")


class Resuming:
    """A worker that resumes the waiting run on its first claim."""

    def __init__(self, resumed: asyncio.Future[str]) -> None:
        self._resumed = resumed

    async def process_one(self) -> bool:
        self._resumed.set_result("completed")
        return True


async def test_a_worker_that_dies_fails_the_waiting_lane_with_its_error() -> None:
    resumed: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    async with WorkerTasks(Broken(), 2).running() as workers:
        workers.wake()
        with pytest.raises(ConnectionResetError, match="lost its connection"):
            await asyncio.wait_for(workers.outcome(resumed, 120), 10)


async def test_a_resumed_run_is_the_lanes_outcome() -> None:
    resumed: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    async with WorkerTasks(Resuming(resumed), 2).running() as workers:
        workers.wake()
        assert await workers.outcome(resumed, 10) == "completed"


async def test_no_worker_resuming_the_run_is_a_timeout() -> None:
    resumed: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    async with WorkerTasks(Resuming(asyncio.get_running_loop().create_future()), 1).running() as w:
        with pytest.raises(TimeoutError, match="no worker resumed"):
            await w.outcome(resumed, 0.05)


class Closing:
    """A worker whose claim resumes the run, then takes a while to close the job (its
    transaction's commit, after the run's outcome is known)."""

    def __init__(self, resumed: asyncio.Future[str], close: asyncio.Event) -> None:
        self._resumed = resumed
        self._close = close
        self.closed = False

    async def process_one(self) -> bool:
        self._resumed.set_result("completed")
        await self._close.wait()
        self.closed = True
        return True


async def test_quiet_waits_for_the_claim_that_resumed_the_run_to_end() -> None:
    resumed: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    close = asyncio.Event()
    worker = Closing(resumed, close)
    async with WorkerTasks(worker, 2).running() as workers:
        workers.wake()
        assert await workers.outcome(resumed, 10) == "completed"
        quiet = asyncio.create_task(workers.quiet())
        await ready_tasks_ran()  # all in this loop, on events: nothing else could let it end
        assert not quiet.done(), "quiet before the claim ended"
        close.set()
        await asyncio.wait_for(quiet, 10)
        assert worker.closed
