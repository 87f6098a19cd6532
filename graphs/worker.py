"""The resume worker: claims decided calls from the queue and resumes their runs.

Woken by LISTEN/NOTIFY, with a polling fallback. Several workers (in one process or many) may
run at once: ``FOR UPDATE SKIP LOCKED`` hands each job to one of them, and the per-thread lock
serialises the steps of one run.
"""

from __future__ import annotations

import asyncio
import logging

from approvals.errors import ApprovalsError, GraphLoadError, GraphNotFound
from approvals.ports import ResumeQueue
from graphs.runner import Runner

log = logging.getLogger("approvals.worker")


class Worker:
    def __init__(
        self,
        *,
        runner: Runner,
        queue: ResumeQueue,
        concurrency: int = 4,
        poll_interval: float = 1.0,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._runner = runner
        self._queue = queue
        self._concurrency = concurrency
        self._poll_interval = poll_interval

    async def process_one(self) -> bool:
        """Claim and resume one job. ``False`` when the queue had nothing claimable."""
        async with self._queue.claim() as claimed:
            if claimed is None:
                return False
            log.info("resuming run %s for request %s", claimed.job.run_id, claimed.job.request_id)
            try:
                await self._runner.resume(claimed)
            except (GraphNotFound, GraphLoadError):
                # This worker cannot build the run's graph (its configuration lacks it). The
                # job stays queued, for a worker that can, and the error surfaces.
                raise
            except ApprovalsError as exc:
                log.error("job %s failed: %s", claimed.job.id, exc)
                await claimed.complete("failed", str(exc))
            return True

    async def _lane(self) -> int:
        done = 0
        while await self.process_one():
            done += 1
        return done

    async def drain(self) -> int:
        """Resume everything queued now; return how many jobs were processed."""
        counts = await asyncio.gather(*(self._lane() for _ in range(self._concurrency)))
        return sum(counts)

    async def run(self, stop: asyncio.Event) -> None:
        """Work until ``stop`` is set."""
        while not stop.is_set():
            try:
                await self.drain()
                await self._queue.wait(self._poll_interval)
            except ApprovalsError as exc:
                log.error("worker: %s; retrying", exc)
                await asyncio.sleep(self._poll_interval)
