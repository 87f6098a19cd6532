"""A worker's heartbeat: its row in ``workers`` (``storage.workers``) made when it starts,
refreshed every ``HEARTBEAT_SECONDS`` while it works, deleted when it stops. A worker not seen
for ``LIVE_SECONDS`` is taken for gone (killed: its row stays until another worker forgets it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from approvals.errors import DatabaseUnavailable
from storage.db import Database
from storage.workers import LiveWorker, PgWorkers

if TYPE_CHECKING:
    from graphs.hosts.registry import GraphRegistry

log = logging.getLogger("approvals.worker")

#: How often a worker says it is alive.
HEARTBEAT_SECONDS = 10.0
#: A worker not seen for this long is not counted as serving anything.
LIVE_SECONDS = 3 * HEARTBEAT_SECONDS
#: A row of a worker not seen for this long is deleted (by the next worker that starts).
FORGET_SECONDS = 24 * 3600.0


async def heartbeat(db: Database, registry: GraphRegistry, stop: asyncio.Event) -> None:
    """Say this worker is alive, and which graphs of ``registry`` it serves, until ``stop`` is
    set; then leave. A database that went away is retried at the next beat: the worker's own
    loops say so."""
    workers = PgWorkers(db)
    graphs, config_digest = registry.names(), registry.config_digest()
    worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    forgotten = False
    try:
        while not stop.is_set():
            try:
                await workers.seen(
                    worker_id,
                    host=socket.gethostname(),
                    pid=os.getpid(),
                    graphs=graphs,
                    config_digest=config_digest,
                )
                if not forgotten:
                    # Once a worker's life: a row a day old is out of every count anyway.
                    await workers.forget_stale(FORGET_SECONDS)
                    forgotten = True
            except DatabaseUnavailable as exc:
                log.debug("heartbeat: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), HEARTBEAT_SECONDS)
    finally:
        with contextlib.suppress(DatabaseUnavailable):
            await workers.gone(worker_id)


async def live_workers(db: Database) -> list[LiveWorker]:
    """The workers seen within ``LIVE_SECONDS``."""
    return await PgWorkers(db).live(LIVE_SECONDS)


async def unserved_jobs(db: Database) -> dict[str, int]:
    """The queued resume jobs, by graph, that no live worker serves: they wait for a worker
    that serves their graph (or for their runs to be cancelled)."""
    return await PgWorkers(db).unserved_jobs(LIVE_SECONDS)


async def waits_for_worker(
    db: Database, graph: str, status: str, request_statuses: Iterable[str]
) -> bool:
    """Whether a run (its ``graph``, ``status`` and its requests' statuses) waits for a worker
    that serves its graph: it still waits, a request of it was decided (so its resume is
    queued), and no live worker serves the graph."""
    if status != "waiting" or all(s == "pending" for s in request_statuses):
        return False
    return graph in await unserved_jobs(db)


async def report_waits_for_worker(db: Database, report: Mapping[str, Any]) -> bool:
    """``waits_for_worker`` for a run as ``Engine.report`` gives it."""
    statuses = [str(r["status"]) for r in report["requests"]]
    return await waits_for_worker(db, str(report["graph"]), str(report["status"]), statuses)
