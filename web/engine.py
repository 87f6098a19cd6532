"""The composition root: one pool, the repositories, the saver, the registry, runner, worker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from approvals.decisions import decide
from approvals.model import Decision, Verdict, Vote
from graphs.deps import GraphDeps
from graphs.registry import GraphRegistry
from graphs.runner import Runner
from graphs.worker import Worker
from storage.accounts import PgAccounts
from storage.audit import PgAuditLog
from storage.checkpoints import PgPendingInterrupts, make_saver
from storage.db import Database, check_connection, is_transient, open_pool, translated_errors
from storage.notifications import PgNotifications
from storage.queue import PgResumeQueue
from storage.requests import PgApprovalRequests, PgDecisions
from storage.runs import PgRuns, PgSideEffects, PgToolLedger
from web.notify import Notifier
from web.settings import Settings


@dataclass
class Engine:
    """Everything a CLI command, the web app or a test needs, wired once."""

    url: str
    settings: Settings
    db: Database
    audit: PgAuditLog
    requests: PgApprovalRequests
    decisions: PgDecisions
    runs: PgRuns
    ledger: PgToolLedger
    effects: PgSideEffects
    queue: PgResumeQueue
    registry: GraphRegistry
    runner: Runner
    worker: Worker
    accounts: PgAccounts
    #: Tells people when calls wait or are escalated; run by the worker processes.
    notifier: Notifier

    async def decide(
        self,
        request_id: str,
        verdict: Verdict | str,
        *,
        principal: str,
        reason: str | None = None,
        args: dict[str, Any] | None = None,
    ) -> Decision | Vote:
        """Decide a pending call as an already-authenticated ``principal``."""
        return await decide(
            self.requests,
            self.decisions,
            request_id,
            verdict,
            principal=principal,
            reason=reason,
            args=args,
        )


@asynccontextmanager
async def open_engine(url: str, settings: Settings | None = None) -> AsyncIterator[Engine]:
    """The engine on the database at ``url`` (already upgraded), for the life of the block.

    Raises ``DatabaseUnavailable`` at once when the server cannot be reached."""
    settings = settings or Settings(database_url=url)
    await check_connection(url)
    pool = open_pool(url, max_size=settings.pool_max_size)
    with translated_errors():
        await pool.open(wait=True, timeout=15)
    queue: PgResumeQueue | None = None
    try:
        db = Database(pool)
        audit = PgAuditLog(db)
        requests = PgApprovalRequests(db)
        runs = PgRuns(db)
        ledger = PgToolLedger(db)
        effects = PgSideEffects(db)
        queue = PgResumeQueue(db, url)
        saver = make_saver(pool)
        deps = GraphDeps(
            checkpointer=saver,
            requests=requests,
            ledger=ledger,
            effects=effects,
            request_ttl=timedelta(seconds=settings.request_ttl_seconds),
            reconcile_group=settings.operator_group,
        )
        registry = GraphRegistry(deps, settings.graph_entries())
        runner = Runner(
            registry=registry,
            runs=runs,
            interrupts=PgPendingInterrupts(db, saver.serde),
            transient=is_transient,
        )
        worker = Worker(runner=runner, queue=queue, concurrency=settings.worker_concurrency)
        yield Engine(
            url=url,
            settings=settings,
            db=db,
            audit=audit,
            requests=requests,
            decisions=PgDecisions(db),
            runs=runs,
            ledger=ledger,
            effects=effects,
            queue=queue,
            registry=registry,
            runner=runner,
            worker=worker,
            accounts=PgAccounts(db),
            notifier=Notifier.from_settings(PgNotifications(db), settings),
        )
    finally:
        if queue is not None:
            await queue.close()
        await pool.close()
