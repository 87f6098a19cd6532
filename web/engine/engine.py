"""``Engine``: the one object every face works through, thin. It holds the adapters
(``web.engine.adapters``) and the parts built on first use (the LangGraph side, the event hubs),
and delegates each use case to the module of its family (``decide``, ``runs``, ``reads``,
``edits``); the repositories are here too, for the faces' reads (lists, detail pages, exports).
Every change goes through a use-case method."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from approvals.authz import ApproverRules
from approvals.decision_kinds import Ruling
from approvals.grants import Grant
from approvals.listing import (
    DEFAULT_PAGE,
    EVERY_REQUEST,
    Page,
    PendingOrder,
    RequestFilter,
    Scope,
    Viewer,
)
from approvals.model import DecisionRecord, PendingCall, Run, RunStatus, Vote
from approvals.principals import Principal
from storage.accounts import PgAccounts
from storage.audit import PgAuditLog
from storage.db import Connection, Database
from storage.expiry import PgExpiry
from storage.notifications import PgNotifications
from storage.ops import Cancellation, PgOperations, Pruned, Retry
from storage.queue import PgResumeQueue
from storage.request_events import RequestEventHub
from storage.requests import PgApprovalRequests, PgDecisions
from storage.run_events import PgRunEvents, RunEventHub
from storage.runs import PgRuns, PgToolLedger
from storage.sessions import PgSessions
from storage.sign_ins import PgSignInCounts
from web.engine.adapters import Adapters, EventHubs
from web.engine.agents import AgentSide, Graphs
from web.engine.decide import DecideUseCases
from web.engine.edits import EditCheck
from web.engine.grants import GrantUseCases
from web.engine.reads import ReadUseCases
from web.engine.runs import RunUseCases
from web.engine.threads import ThreadUseCases
from web.notifier import Notifier
from web.settings import Settings

if TYPE_CHECKING:
    from graphs.examples.effects import SqlSideEffects
    from graphs.hosts.langgraph.streaming import Publish
    from graphs.hosts.registry import GraphRegistry
    from graphs.orchestration.runner import Runner
    from graphs.orchestration.worker import Worker
    from graphs.run.outcome import RunOutcome


class Engine:
    """Everything a CLI command, the web app or a test needs, wired once by ``open_engine``
    (this module's docstring)."""

    def __init__(self, adapters: Adapters) -> None:
        self.adapters = adapters
        self._hubs = EventHubs(adapters.url, adapters.db)
        self._agents = AgentSide(adapters)
        self._reads = ReadUseCases(adapters, self._hubs)
        self._edits = EditCheck(adapters.runs, adapters.ledger, self._agents)
        self._decide = DecideUseCases(adapters, self._reads, self._edits)
        self._grants = GrantUseCases(adapters, self._reads)
        self._runs = RunUseCases(adapters, self._reads, self._agents)
        self._threads = ThreadUseCases(adapters)

    async def close(self) -> None:
        """Close the listening connections the engine opened: the event hubs a stream made
        listen, and the resume queue's (``open_engine`` does, before closing the pool)."""
        await self._hubs.close()
        await self.adapters.queue.close()

    # -- The adapters (``Adapters``) -------------------------------------------------------

    @property
    def url(self) -> str:
        return self.adapters.url

    @property
    def settings(self) -> Settings:
        return self.adapters.settings

    @property
    def rules(self) -> ApproverRules:
        return self.adapters.rules

    @property
    def audit(self) -> PgAuditLog:
        return self.adapters.audit

    @property
    def requests(self) -> PgApprovalRequests:
        return self.adapters.requests

    @property
    def decisions(self) -> PgDecisions:
        return self.adapters.decisions

    @property
    def runs(self) -> PgRuns:
        return self.adapters.runs

    @property
    def ledger(self) -> PgToolLedger:
        return self.adapters.ledger

    @property
    def queue(self) -> PgResumeQueue:
        return self.adapters.queue

    @property
    def accounts(self) -> PgAccounts:
        return self.adapters.accounts

    @property
    def operations(self) -> PgOperations:
        return self.adapters.operations

    @property
    def expiry(self) -> PgExpiry:
        return self.adapters.expiry

    @property
    def notifications(self) -> PgNotifications:
        return self.adapters.notifications

    @property
    def sessions(self) -> PgSessions:
        return self.adapters.sessions

    @property
    def run_events(self) -> PgRunEvents:
        return self.adapters.run_events

    @property
    def notifier(self) -> Notifier:
        return self.adapters.notifier

    @property
    def sign_ins(self) -> PgSignInCounts:
        return self.adapters.sign_ins

    @property
    def _db(self) -> Database:
        """The database the adapters share (tests and the benchmarks reach the pool here)."""
        return self.adapters.db

    def connection(self) -> AbstractAsyncContextManager[Connection]:
        """A pooled connection, for what no use case covers: tests that set rows up or read
        them back, the benchmark. The faces never use it."""
        return self.adapters.db.pool.connection()

    @property
    def threads(self) -> ThreadUseCases:
        """The LangGraph face's threads and their metadata (``web.engine.threads``)."""
        return self._threads

    # -- Built on first use (``EventHubs``, ``AgentSide``) ---------------------------------

    @property
    def streams(self) -> RunEventHub:
        """Wakes this process's run event streams (one LISTEN connection, made on first use)."""
        return self._hubs.runs

    @property
    def request_streams(self) -> RequestEventHub:
        """Feeds this process's request streams (live views, ``GET /api/v1/pending/events``)
        from one LISTEN connection, made on first use."""
        return self._hubs.requests

    @property
    def registry(self) -> GraphRegistry:
        """The graphs by name (built, with LangGraph, on first use)."""
        return self._agents.graphs.registry

    @property
    def runner(self) -> Runner:
        return self._agents.graphs.runner

    @property
    def worker(self) -> Worker:
        return self._agents.graphs.worker

    @property
    def _graphs(self) -> Graphs:
        return self._agents.graphs

    @property
    def effects(self) -> SqlSideEffects:
        """The examples' side-effect log (``AgentSide.effects``)."""
        return self._agents.effects

    # -- Deciding (``web.engine.decide``, ``web.engine.edits``) ----------------------------

    async def decide(
        self,
        request_id: str,
        verdict: Ruling | str,
        *,
        principal: Principal,
        reason: str | None = None,
        args: dict[str, Any] | None = None,
        message: str | None = None,
        always: bool = False,
    ) -> DecisionRecord | Vote:
        """Decide a pending call as the signed-in ``principal`` (``DecideUseCases.decide``)."""
        return await self._decide.decide(
            request_id,
            verdict,
            principal=principal,
            reason=reason,
            args=args,
            message=message,
            always=always,
        )

    async def decide_as_operator(
        self,
        request_id: str,
        verdict: Ruling | str,
        *,
        principal: str,
        override_by: str | None = None,
        reason: str | None = None,
        args: dict[str, Any] | None = None,
        message: str | None = None,
        always: bool = False,
    ) -> DecisionRecord | Vote:
        """The operator console's decision in ``principal``'s name
        (``DecideUseCases.decide_as_operator``)."""
        return await self._decide.decide_as_operator(
            request_id,
            verdict,
            principal=principal,
            override_by=override_by,
            reason=reason,
            args=args,
            message=message,
            always=always,
        )

    async def grants_of(self, run_id: str, *, by: Principal | str) -> list[Grant]:
        """A run's standing grants, for an operator (``GrantUseCases.grants_of``)."""
        return await self._grants.grants_of(run_id, by=by)

    async def revoke_grant(self, grant_id: str, *, by: Principal | str) -> Grant:
        """Revoke a standing grant, as an operator (``GrantUseCases.revoke_grant``)."""
        return await self._grants.revoke_grant(grant_id, by=by)

    async def console_principal(self, text: str, *, deciding: bool = False) -> str:
        """The principal the console's ``--as TEXT`` names
        (``DecideUseCases.console_principal``)."""
        return await self._decide.console_principal(text, deciding=deciding)

    async def recheck_edit(self, request: PendingCall, args: dict[str, Any]) -> dict[str, Any]:
        """An approver's edited ``args``, checked (``EditCheck.recheck_edit``)."""
        return await self._edits.recheck_edit(request, args)

    # -- Runs (``web.engine.runs``) --------------------------------------------------------

    async def start_run(
        self,
        graph: str,
        input: Any,
        *,
        principal: Principal | str,
        thread_id: str | None = None,
        observe: Publish | None = None,
    ) -> RunOutcome:
        """Start a run of ``graph`` (``RunUseCases.start_run``)."""
        return await self._runs.start_run(
            graph, input, principal=principal, thread_id=thread_id, observe=observe
        )

    async def cancel_run(
        self, run_id: str, *, by: Principal | str, reason: str | None = None
    ) -> Cancellation:
        """Cancel a run that has not ended (``RunUseCases.cancel_run``)."""
        return await self._runs.cancel_run(run_id, by=by, reason=reason)

    async def retry_run(
        self, run_id: str, *, by: Principal | str, reason: str | None = None
    ) -> Retry:
        """Queue a waiting run's failed resumes again (``RunUseCases.retry_run``)."""
        return await self._runs.retry_run(run_id, by=by, reason=reason)

    async def report(self, run_id: str, *, viewer: Principal | None = None) -> dict[str, Any]:
        """A run as reports show it (``RunUseCases.report``)."""
        return await self._runs.report(run_id, viewer=viewer)

    async def prune(
        self,
        older_than: timedelta,
        *,
        principal: str,
        dry_run: bool = False,
        checkpoints_only: bool = False,
    ) -> Pruned:
        """Retention (``RunUseCases.prune``)."""
        return await self._runs.prune(
            older_than, principal=principal, dry_run=dry_run, checkpoints_only=checkpoints_only
        )

    async def work(self, stop: asyncio.Event) -> None:
        """Resume, expire and notify until ``stop`` is set (``RunUseCases.work``)."""
        await self._runs.work(stop)

    async def drain(self) -> int:
        """Expire, then resume everything queued (``RunUseCases.drain``)."""
        return await self._runs.drain()

    async def start_in_background(
        self, graph: str, input: Any, *, principal: Principal, thread_id: str
    ) -> Run:
        """Start a run without waiting for its step (``RunUseCases.start_in_background``)."""
        run_id = str(uuid.uuid4())
        # Before the start: the event its row's insert publishes must not be missed.
        sub = await self._hubs.runs.subscribe(run_id)
        try:
            return await self._runs.start_in_background(
                graph, input, principal=principal, thread_id=thread_id, run_id=run_id, sub=sub
            )
        finally:
            sub.close()

    async def thread_state(
        self, run: Run, principal: Principal, *, values: bool = True
    ) -> dict[str, Any]:
        """A thread's state as ``principal`` may see it (``RunUseCases.thread_state``)."""
        return await self._runs.thread_state(run, principal, values=values)

    async def resume_thread(
        self, thread_id: str, resume: Any, *, principal: Principal
    ) -> tuple[Run, int, list[DecisionRecord | Vote]]:
        """A HITL resume sent to a thread, decided by the signed-in ``principal``: each call it
        names is decided as ``decide`` decides it, with every approver rule, and consumed once
        (``RunUseCases.resume_plan``). The run, its latest event before the first decision
        (for ``await_settled``) and the decisions."""
        run, plan = await self._runs.resume_plan(thread_id, resume, principal)
        mark = await self._runs.last_event(run.id)
        decided = [
            await self._decide.decide(request_id, principal=principal, **fields)
            for request_id, fields in plan
        ]
        return run, mark, decided

    async def await_settled(self, run_id: str, after: int, seconds: float) -> Run:
        """Until a step of the run settles after event ``after``, at most ``seconds``
        (``RunUseCases.settled``)."""
        sub = await self._hubs.runs.subscribe(run_id)
        try:
            return await self._runs.settled(run_id, after, sub, seconds)
        finally:
            sub.close()

    async def step_events(
        self, run_id: str, after: int, seconds: float
    ) -> AsyncIterator[dict[str, Any]]:
        """The run's events after event ``after`` until a step settles, at most ``seconds``
        (``RunUseCases.step_events``)."""
        sub = await self._hubs.runs.subscribe(run_id)
        try:
            async for row in self._runs.step_events(run_id, after, sub, seconds):
                yield row
        finally:
            sub.close()

    async def join_run(self, run_id: str, seconds: float) -> Run:
        """The run once its step in progress settles, at most ``seconds``
        (``RunUseCases.join``)."""
        sub = await self._hubs.runs.subscribe(run_id)
        try:
            return await self._runs.join(run_id, sub, seconds)
        finally:
            sub.close()

    # -- What the faces show (``web.engine.reads``) ----------------------------------------

    async def visible_request(self, request_id: str, principal: Principal) -> PendingCall:
        """The request, if ``principal`` may see it (``ReadUseCases.visible_request``)."""
        return await self._reads.visible_request(request_id, principal)

    async def visible_run(self, run_id: str, principal: Principal) -> Run:
        """The run, if ``principal`` may see it (``ReadUseCases.visible_run``)."""
        return await self._reads.visible_run(run_id, principal)

    async def visible_thread(self, thread_id: str, principal: Principal) -> Run | None:
        """A thread's latest run, if ``principal`` may see it
        (``ReadUseCases.visible_thread``)."""
        return await self._reads.visible_thread(thread_id, principal)

    async def waiting_threads(self, principal: Principal, limit: int) -> list[Run]:
        """The runs with a call ``principal`` may decide, one per thread
        (``ReadUseCases.waiting_threads``)."""
        return await self._reads.waiting_threads(principal, limit)

    def agent_names(self) -> list[str]:
        """The registered graphs and agents, by name."""
        return self.registry.names()

    def viewer(self, principal: Principal | None) -> Viewer:
        """``principal`` as the list queries take it (``ReadUseCases.viewer``)."""
        return self._reads.viewer(principal)

    async def pending_page(
        self,
        principal: Principal | None,
        *,
        scope: Scope = Scope.SEE,
        order: PendingOrder = PendingOrder.DEADLINE,
        filters: RequestFilter = EVERY_REQUEST,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE,
    ) -> Page[tuple[PendingCall, bool]]:
        """One page of the pending requests ``principal`` may see
        (``ReadUseCases.pending_page``)."""
        return await self._reads.pending_page(
            principal, scope=scope, order=order, filters=filters, cursor=cursor, limit=limit
        )

    async def history_page(
        self,
        principal: Principal,
        *,
        filters: RequestFilter = EVERY_REQUEST,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE,
    ) -> Page[tuple[PendingCall, dict[str, Any]]]:
        """One page of the decided requests ``principal`` may see
        (``ReadUseCases.history_page``)."""
        return await self._reads.history_page(
            principal, filters=filters, cursor=cursor, limit=limit
        )

    async def runs_page(
        self,
        principal: Principal,
        *,
        status: RunStatus | None = None,
        graph: str | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE,
    ) -> Page[Run]:
        """One page of the runs ``principal`` may see (``ReadUseCases.runs_page``)."""
        return await self._reads.runs_page(
            principal, status=status, graph=graph, cursor=cursor, limit=limit
        )

    async def pending_counts(self, principal: Principal | None) -> tuple[int, dict[str, int]]:
        """How many pending requests ``principal`` may see (``ReadUseCases.pending_counts``)."""
        return await self._reads.pending_counts(principal)

    async def shown_request(self, request_id: str, *, viewer: str) -> PendingCall | None:
        """The request, as it may be shown to ``viewer`` (``ReadUseCases.shown_request``)."""
        return await self._reads.shown_request(request_id, viewer=viewer)

    async def newest_requests(self, limit: int, *, viewer: str) -> list[PendingCall]:
        """The newest requests of any status, for the operator console
        (``ReadUseCases.newest_requests``)."""
        return await self._reads.newest_requests(limit, viewer=viewer)

    async def shown_requests(
        self, requests: list[PendingCall], *, viewer: str
    ) -> list[PendingCall]:
        """``requests`` without those whose shown copy changed
        (``ReadUseCases.shown_requests``)."""
        return await self._reads.shown_requests(requests, viewer=viewer)
