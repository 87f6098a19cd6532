"""The resume queue and the per-thread lock.

A claimed job is held by an open transaction: the row lock (``FOR UPDATE SKIP LOCKED``) and the
thread's advisory lock live exactly as long as the worker's connection. A worker that dies loses
its connection, PostgreSQL rolls the transaction back, and the job is claimable again: no
heartbeats, no leases to tune.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager

import psycopg
from psycopg.rows import dict_row

from approvals.model import JobStatus, ResumeJob, RunStatus
from approvals.ports import Settlement
from storage.checkpoints import forget_known
from storage.db import Connection, Database, translated_errors
from storage.runs import settlement_outcome, settlement_params

CHANNEL = "approvals_resume"


class PgClaimedJob:
    def __init__(self, db: Database, conn: Connection, job: ResumeJob) -> None:
        self._db = db
        self._conn = conn
        self._job = job
        #: After ``complete``: the settlement's outcome ('settled', 'refused' when the run had
        #: ended, 'recorded' when no run status was given).
        self.outcome: str | None = None

    @property
    def job(self) -> ResumeJob:
        return self._job

    async def complete(
        self, status: JobStatus, error: str | None = None, settlement: Settlement | None = None
    ) -> None:
        params = settlement_params(
            settlement or Settlement(run_id=self._job.run_id, status=RunStatus.WAITING)
        )
        if settlement is None:
            params["run_status"] = None
        else:
            params["run_status"] = params["status"]
        params.update(id=self._job.id, status=JobStatus(status).value, error=error)
        row = await self._db.one("finish_job", params, self._conn)
        if status == JobStatus.FAILED and settlement is None:
            await self._db.one("record_resume_failed", {"run_id": self._job.run_id}, self._conn)
        if settlement is not None:
            self.outcome = settlement_outcome(row["outcome"] if row else None, settlement)
        elif row is not None:
            self.outcome = row["outcome"]


class PgResumeQueue:
    def __init__(self, db: Database, url: str) -> None:
        self._db = db
        self._url = url
        self._listener: psycopg.AsyncConnection[dict[str, object]] | None = None

    @asynccontextmanager
    async def claim(self, skip_graphs: Collection[str] = ()) -> AsyncIterator[PgClaimedJob | None]:
        async with self._db.transaction() as conn:
            row = await self._db.one("claim_job", {"skip": list(skip_graphs)}, conn)
            if row is None:
                yield None
                return
            try:
                yield PgClaimedJob(self._db, conn, ResumeJob.from_row(row))
            finally:
                # The thread's lock goes with the claim: what the resume's check read of the
                # thread's checkpoint may be stale from here on.
                forget_known()

    async def queued(self) -> int:
        row = await self._db.one("queued_jobs", {})
        return int(row["n"]) if row else 0

    async def queued_by_graph(self) -> dict[str, int]:
        """The resume jobs waiting for a worker, by their run's graph."""
        rows = await self._db.all("queued_jobs_by_graph", {})
        return {str(row["graph"]): int(row["n"]) for row in rows}

    async def wait(self, seconds: float) -> bool:
        with translated_errors():
            if self._listener is None or self._listener.closed:
                self._listener = await psycopg.AsyncConnection.connect(
                    self._url, autocommit=True, row_factory=dict_row
                )
                await self._listener.execute(f"LISTEN {CHANNEL}")
            got = False
            async for _ in self._listener.notifies(timeout=seconds, stop_after=1):
                got = True
            return got

    async def close(self) -> None:
        if self._listener is not None:
            await self._listener.close()
            self._listener = None
