"""The composition root: one pool, the repositories, the saver, the registry, runner, worker.

The LangGraph side (saver, registry, runner, worker) is built on first use: importing LangGraph
takes seconds, and most CLI commands (decide, pending, audit, users, ...) never need it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from approvals.decisions import decide
from approvals.model import Decision, Verdict, Vote
from storage.accounts import PgAccounts
from storage.audit import PgAuditLog
from storage.db import Database, check_connection, is_transient, open_pool, translated_errors
from storage.notifications import PgNotifications
from storage.queue import PgResumeQueue
from storage.requests import PgApprovalRequests, PgDecisions
from storage.runs import PgRuns, PgSideEffects, PgToolLedger
from web.notify import Notifier
from web.settings import Settings

if TYPE_CHECKING:
    from graphs.registry import GraphRegistry
    from graphs.runner import Runner
    from graphs.worker import Worker


@dataclass(frozen=True)
class _Graphs:
    registry: GraphRegistry
    runner: Runner
    worker: Worker


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
    accounts: PgAccounts
    #: Tells people when calls wait or are escalated; run by the worker processes.
    notifier: Notifier

    @cached_property
    def _graphs(self) -> _Graphs:
        from graphs.deps import GraphDeps
        from graphs.registry import GraphRegistry
        from graphs.runner import Runner
        from graphs.worker import Worker
        from storage.checkpoints import PgResumeChecks, make_saver

        saver = make_saver(self.db.pool)
        deps = GraphDeps(
            checkpointer=saver,
            requests=self.requests,
            ledger=self.ledger,
            effects=self.effects,
            request_ttl=timedelta(seconds=self.settings.request_ttl_seconds),
            reconcile_group=self.settings.operator_group,
        )
        registry = GraphRegistry(deps, self.settings.graph_entries())
        runner = Runner(
            registry=registry,
            runs=self.runs,
            checks=PgResumeChecks(self.db, saver.serde),
            transient=is_transient,
        )
        worker = Worker(
            runner=runner, queue=self.queue, concurrency=self.settings.worker_concurrency
        )
        return _Graphs(registry=registry, runner=runner, worker=worker)

    @property
    def registry(self) -> GraphRegistry:
        """The graphs by name (built, with LangGraph, on first use)."""
        return self._graphs.registry

    @property
    def runner(self) -> Runner:
        return self._graphs.runner

    @property
    def worker(self) -> Worker:
        return self._graphs.worker

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
            accounts=PgAccounts(db),
            notifier=Notifier.from_settings(PgNotifications(db), settings),
        )
    finally:
        if queue is not None:
            await queue.close()
        await pool.close()
