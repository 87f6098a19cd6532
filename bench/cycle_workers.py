"""How ``bench/approval_cycle.py`` resumes ours: the runner that tells each cycle when its own run
resumed, and (``--resume-path workers``) worker coroutines beside the lanes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any


class TrackingRunner:
    """Hands ``Worker`` the engine's runner, and tells each cycle when its own run resumed
    (at concurrency 16 a lane's ``process_one`` may claim another lane's job)."""

    def __init__(self, runner: Any) -> None:
        self._runner = runner
        self.waiting: dict[str, asyncio.Future[Any]] = {}

    def expect(self, run_id: str) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting[run_id] = future
        return future

    async def resume(self, claimed: Any) -> Any:
        future = self.waiting.pop(claimed.job.run_id, None)
        try:
            outcome = await self._runner.resume(claimed)
        except BaseException as exc:
            if future is not None and not future.done():
                future.set_exception(exc)
            raise
        if future is not None and not future.done():
            future.set_result(outcome)
        return outcome


class WorkerTasks:
    """``--resume-path workers``: worker coroutines beside the lanes, as a deployment runs its
    workers apart from whoever starts runs (and as DBOS runs its workflows). Each decision
    wakes one, which claims the oldest queued job (a LISTEN/NOTIFY worker, without the
    notification's latency); a cycle ends when its own run has been resumed, not when the
    lane's own claim (perhaps another lane's job) is done."""

    def __init__(self, worker: Any, count: int) -> None:
        self._worker = worker
        self._count = count
        self._wake: asyncio.Queue[None] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._busy = 0
        #: Set while no wake-up waits and no worker is inside a claim.
        self._quiet = asyncio.Event()
        self._quiet.set()
        #: Set with the error of the first worker coroutine that dies, so that a lane waiting
        #: on its run fails with that error rather than a timeout.
        self.died: asyncio.Future[None] | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[WorkerTasks]:
        self.died = asyncio.get_running_loop().create_future()
        self._tasks = [asyncio.create_task(self._serve()) for _ in range(self._count)]
        try:
            yield self
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def wake(self) -> None:
        self._quiet.clear()
        self._wake.put_nowait(None)

    async def quiet(self) -> None:
        """Until every wake-up has been served and each claim's transaction has ended. A lane's
        cycle ends when its run has been resumed, before the worker's claim commits the job's
        close: counting the jobs left queued before then would count that one."""
        await self._quiet.wait()

    async def outcome(self, resumed: asyncio.Future[Any], seconds: float) -> Any:
        """``resumed``'s result once a worker has resumed the run; a worker's error if one died
        first."""
        assert self.died is not None, "outcome() outside running()"
        await asyncio.wait({resumed, self.died}, timeout=seconds, return_when="FIRST_COMPLETED")
        if self.died.done():
            self.died.result()
        if not resumed.done():
            raise TimeoutError(f"no worker resumed the run within {seconds:.0f} s")
        return resumed.result()

    async def _serve(self) -> None:
        try:
            while True:
                await self._wake.get()
                self._busy += 1
                try:
                    # One claim per decision; a job another worker's claim transaction still
                    # holds is skipped (SKIP LOCKED), so a claim may find nothing for a moment:
                    # again.
                    while True:
                        if await self._worker.process_one():
                            break
                        await asyncio.sleep(0.001)
                finally:
                    self._busy -= 1
                    if self._busy == 0 and self._wake.empty():
                        self._quiet.set()
        except Exception as exc:
            if self.died is not None and not self.died.done():
                self.died.set_exception(exc)
            raise
