"""What an engine holds: the adapters ``open_engine`` builds once, and the LangGraph side.

The LangGraph side (saver, registry, runner, worker) is built on first use: importing LangGraph
takes seconds, and most CLI commands (decide, pending, audit, users, ...) never need it.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING

from approvals.authz import ApproverRules
from storage.accounts import PgAccounts
from storage.audit import PgAuditLog
from storage.db import Connection, Database, is_transient
from storage.expiry import PgExpiry
from storage.notifications import PgNotifications
from storage.ops import PgOperations
from storage.queue import PgResumeQueue
from storage.request_events import RequestEventHub
from storage.requests import PgApprovalRequests, PgDecisions
from storage.run_events import PgRunEvents, RunEventHub
from storage.runs import PgRuns, PgToolLedger
from storage.sessions import PgSessions
from storage.sign_ins import PgSignInCounts
from storage.statements import PgStatements
from web.notifier import Notifier
from web.settings import Settings

if TYPE_CHECKING:
    from graphs.examples.effects import SqlSideEffects
    from graphs.hosts.registry import GraphRegistry
    from graphs.orchestration.runner import Runner
    from graphs.orchestration.worker import ExpirySweeper, Worker


@dataclass(frozen=True)
class _Graphs:
    registry: GraphRegistry
    runner: Runner
    worker: Worker
    sweeper: ExpirySweeper


@dataclass
class EngineWiring:
    """The engine's adapters, built once by ``open_engine``, and what it builds on first use
    (the graphs, the event hubs); ``Engine`` adds the use cases and the faces' reads."""

    url: str
    settings: Settings
    _db: Database
    rules: ApproverRules
    audit: PgAuditLog
    requests: PgApprovalRequests
    decisions: PgDecisions
    runs: PgRuns
    ledger: PgToolLedger
    queue: PgResumeQueue
    accounts: PgAccounts
    #: Cancels runs, prunes old ones, reads metrics and the schema's state.
    operations: PgOperations
    #: Expires (or escalates) requests past their deadline; run by ``work`` and ``drain``.
    expiry: PgExpiry
    #: Request notifications' deliveries and attempts.
    notifications: PgNotifications
    #: The web app's server-side sessions.
    sessions: PgSessions
    #: What runs' steps produced, for streams and run notifications.
    run_events: PgRunEvents
    #: Tells people when calls wait or are escalated; run by the worker processes.
    notifier: Notifier
    #: pending_counts' recent answers, per visibility: (when, the request events' generation
    #: then, (total, per group)).
    _counts: dict[
        tuple[bool, tuple[str, ...], bool], tuple[float, int, tuple[int, dict[str, int]]]
    ] = field(default_factory=dict)

    @cached_property
    def sign_ins(self) -> PgSignInCounts:
        """Failed password sign-ins, counted for every web process alike, with the limits
        each process's own count has (web.app)."""
        attempts = self.settings.login_attempts
        return PgSignInCounts(
            self._db,
            attempts=attempts,
            window=self.settings.login_window_seconds,
            account_attempts=self.settings.login_account_attempts or attempts * 4,
        )

    @cached_property
    def _graphs(self) -> _Graphs:
        # Function-local on purpose: importing LangGraph takes seconds (see the module's
        # docstring), not to dodge an import loop.
        from graphs.examples.effects import extras
        from graphs.hosts.openai.ports import openai_extras
        from graphs.hosts.registry import GraphRegistry
        from graphs.orchestration.runner import Runner
        from graphs.orchestration.worker import ExpirySweeper, Worker
        from graphs.tool_call.deps import GraphDeps
        from storage.checkpoints import PgResumeChecks, make_saver
        from storage.openai_runs import PgOpenAIRunStates
        from web.security import secret_key

        saver = make_saver(self._db.pool)
        deps = GraphDeps(
            checkpointer=saver,
            requests=self.requests,
            ledger=self.ledger,
            request_ttl=timedelta(seconds=self.settings.request_ttl_seconds),
            reconcile_group=self.settings.operator_group,
            # The OpenAI-SDK agents' server-side RunStates (docs/openai-agents.md), sealed
            # under the key sessions are signed with.
            extras={
                **extras(self.effects),
                **openai_extras(
                    PgOpenAIRunStates(self._db),
                    secret=secret_key(self.settings.secret_key, self.settings.data_dir),
                ),
            },
        )
        registry = GraphRegistry(deps, self.settings.graph_entries())
        runner = Runner(
            registry=registry,
            runs=self.runs,
            checks=PgResumeChecks(self._db, saver.serde),
            transient=is_transient,
            events=self.run_events.publish,
        )
        worker = Worker(
            runner=runner, queue=self.queue, concurrency=self.settings.worker_concurrency
        )
        sweeper = ExpirySweeper(expiry=self.expiry, interval=self.settings.sweep_interval_seconds)
        return _Graphs(registry=registry, runner=runner, worker=worker, sweeper=sweeper)

    @cached_property
    def effects(self) -> SqlSideEffects:
        """The examples' side-effect log (their own table, ``graphs/examples/schema.sql``),
        given to their graphs in ``GraphDeps.extras``; tests and the demo read it back."""
        # Function-local for the same reason as _graphs: the examples import LangGraph.
        from graphs.examples.effects import SqlSideEffects

        return SqlSideEffects(PgStatements(self._db))

    @cached_property
    def streams(self) -> RunEventHub:
        """Wakes this process's run event streams (one LISTEN connection, made on first use)."""
        return RunEventHub(self.url)

    @cached_property
    def request_streams(self) -> RequestEventHub:
        """Feeds this process's request streams (live views, ``GET /api/v1/pending/events``)
        from one LISTEN connection, made on first use."""
        return RequestEventHub(self.url, self._db)

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

    def connection(self) -> AbstractAsyncContextManager[Connection]:
        """A pooled connection, for what no use case covers: tests that set rows up or read
        them back, the benchmark. The faces never use it."""
        return self._db.pool.connection()
