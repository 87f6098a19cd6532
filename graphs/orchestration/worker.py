"""The resume worker: claims decided calls from the queue and resumes their runs.

Woken by LISTEN/NOTIFY, with a polling fallback. Several workers (in one process or many) may
run at once: ``FOR UPDATE SKIP LOCKED`` hands each job to one of them, and the per-thread lock
serialises the steps of one run. Beside them, the ``ExpirySweeper`` expires (or escalates)
requests past their deadline; an expiry queues a resume job like a decision does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from approvals.errors import ApprovalsError, DatabaseUnavailable, GraphLoadError, GraphNotFound
from approvals.model import JobStatus, SweepResult
from approvals.ports import Expiry, ResumeQueue
from approvals.tracing import run_span
from graphs.orchestration.runner import Runner

log = logging.getLogger("approvals.worker")

# Errors that say "not now" or "not here", not "never": the job is left queued (its claim is
# rolled back) for a later try or for a worker that can build the graph.
RETRYABLE = (DatabaseUnavailable, GraphNotFound, GraphLoadError)
MAX_BACKOFF = 30.0
#: How long a worker leaves the jobs of a graph it could not build (not registered here, or
#: its factory failed) to others before trying one again.
SET_ASIDE_SECONDS = 30.0
#: The errors of one job's graph, not of the queue: the job stays queued for a worker that
#: can build it, and this one goes on with the others.
NOT_HERE = (GraphNotFound, GraphLoadError)


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
        #: Graph -> when (monotonic) this worker tries its jobs again.
        self._set_aside: dict[str, float] = {}

    def _skipped(self) -> list[str]:
        now = time.monotonic()
        for graph in [g for g, until in self._set_aside.items() if until <= now]:
            del self._set_aside[graph]
        return list(self._set_aside)

    async def process_one(self) -> bool:
        """Claim and resume one job. ``False`` when the queue had nothing claimable.

        Raises a ``RETRYABLE`` error with the job left queued."""
        async with self._queue.claim(self._skipped()) as claimed:
            if claimed is None:
                return False
            job = claimed.job
            log.info(
                "resuming run %s for request %s",
                job.run_id,
                job.request_id,
                extra={"run_id": job.run_id, "request_id": job.request_id, "job_id": job.id},
            )
            try:
                with run_span(
                    "approvals.claim",
                    job.run_id,
                    job_id=job.id,
                    request_id=job.request_id,
                    thread_id=job.thread_id,
                ):
                    await self._runner.resume(claimed)
            except NOT_HERE as exc:
                # Left queued (the claim rolls back), and set aside: as the oldest job, it
                # was claimed again on every pass and the runs behind it waited.
                log.error(
                    "job %s left queued: %s; this worker leaves graph %r's jobs for %.0fs",
                    job.id,
                    exc,
                    job.graph,
                    SET_ASIDE_SECONDS,
                )
                self._set_aside[job.graph] = time.monotonic() + SET_ASIDE_SECONDS
                raise
            except RETRYABLE:
                raise
            except ApprovalsError as exc:
                log.error("job %s failed: %s", claimed.job.id, exc)
                await claimed.complete(JobStatus.FAILED, str(exc))
            except Exception as exc:
                # Not an error the engine knows: a defect, or a graph or SDK raising what it
                # should not. Left queued, the job would be claimed again by every worker,
                # and end each one's drain (and run) the same way: it fails, loudly, instead.
                log.exception("job %s failed unexpectedly", claimed.job.id)
                await claimed.complete(
                    JobStatus.FAILED, f"unexpected {type(exc).__name__}: {exc}"[:500]
                )
            return True

    async def drain(self, stop: asyncio.Event | None = None) -> int:
        """Resume what is queued (until ``stop`` is set); return how many jobs were processed.

        A job whose graph this worker cannot build stays queued and its graph is set aside
        (``SET_ASIDE_SECONDS``): the lanes go on with the jobs behind it, and its error is
        raised once they are done. On another retryable error (the database) the lanes stop
        claiming, finish what they hold, and the first error is raised."""
        halt = asyncio.Event()
        errors: list[ApprovalsError] = []
        left: list[ApprovalsError] = []

        async def lane() -> int:
            done = 0
            while not halt.is_set() and not (stop is not None and stop.is_set()):
                try:
                    if not await self.process_one():
                        break
                except NOT_HERE as exc:
                    left.append(exc)  # set aside: the lane goes on with the jobs behind it
                    continue
                except RETRYABLE as exc:
                    errors.append(exc)
                    halt.set()
                    break
                done += 1
            return done

        counts = await asyncio.gather(*(lane() for _ in range(self._concurrency)))
        if errors or left:
            raise (errors or left)[0]
        return sum(counts)

    async def run(self, stop: asyncio.Event) -> None:
        """Work until ``stop`` is set; in-flight resumes finish first."""
        backoff = self._poll_interval
        while not stop.is_set():
            try:
                await self.drain(stop)
                backoff = self._poll_interval
                if not stop.is_set():
                    await self._idle(stop)
            except RETRYABLE as exc:
                log.error("worker: %s; retrying in %.0fs", exc, backoff)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)

    async def _idle(self, stop: asyncio.Event) -> None:
        """Wait for a new-job notification or the poll interval, but no longer than until
        ``stop`` is set: a worker told to stop (SIGTERM, the web app's shutdown) returns at
        once instead of sleeping out its poll interval first."""
        waiting = asyncio.ensure_future(self._queue.wait(self._poll_interval))
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait((waiting, stopping), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            waiting.cancel()  # a no-op once it is done
            await asyncio.wait((waiting, stopping))
        if not waiting.cancelled():
            waiting.result()  # a RETRYABLE error of the wait is raised here


class ExpirySweeper:
    """Runs the expiry sweep every ``interval`` seconds. Several may run at once (in one process
    or many): each request is escalated or expired by exactly one sweep."""

    def __init__(self, *, expiry: Expiry, interval: float = 5.0) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self._expiry = expiry
        self._interval = interval

    async def sweep(self) -> SweepResult:
        """One sweep, now."""
        return await self._expiry.sweep()

    async def run(self, stop: asyncio.Event) -> None:
        """Sweep until ``stop`` is set; an unreachable database is retried with backoff."""
        delay = self._interval
        while not stop.is_set():
            try:
                await self._expiry.sweep()
                delay = self._interval
            except DatabaseUnavailable as exc:
                log.error("expiry sweep: %s; retrying in %.0fs", exc, delay)
                delay = min(delay * 2, MAX_BACKOFF)
            except Exception:
                # Whatever it was, requests must keep expiring: log it loudly and try again
                # rather than let the sweeper die unnoticed beside a healthy worker.
                log.exception("expiry sweep failed; retrying in %.0fs", delay)
                delay = min(delay * 2, MAX_BACKOFF)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
