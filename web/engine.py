"""The application layer: one method per use case, and the composition root that wires them.

Every face (the JSON API, the pages, the CLI, the web app's worker) does what it does through
an ``Engine``: it translates its input to a call here and the result (or the error's category)
back. The use cases are ``start_run``, ``decide`` (and the console's ``decide_as_operator``),
``cancel_run``, ``report``, ``work`` and ``drain``; the approver rules are applied here, for
every caller. ``open_engine`` builds the pool and every adapter once; nothing else builds one.

The LangGraph side (saver, registry, runner, worker) is built on first use: importing LangGraph
takes seconds, and most CLI commands (decide, pending, audit, users, ...) never need it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from approvals.authz import ApproverRules
from approvals.decisions import decide, parse_request_id
from approvals.errors import (
    EditedArgumentsInvalid,
    EditRefused,
    GraphNotFound,
    InvalidRunId,
    InvalidValue,
    RequestNotFound,
    RunNotAllowed,
    RunNotFound,
    RunPruned,
    ShownCopyChanged,
)
from approvals.identity import call_identity, idempotency_key
from approvals.listing import (
    DEFAULT_PAGE,
    EVERY_REQUEST,
    MAX_PAGE,
    Cursor,
    Page,
    PendingOrder,
    RequestFilter,
    Scope,
    Viewer,
    listing_key,
)
from approvals.model import (
    DecisionRecord,
    PendingCall,
    RequestStatus,
    Ruling,
    Run,
    RunStatus,
    Vote,
)
from approvals.principals import Principal
from approvals.redaction import redacted_paths, restore
from storage.accounts import PgAccounts
from storage.audit import AuditFilter, PgAuditLog, Verification
from storage.db import (
    Connection,
    Database,
    check_connection,
    is_transient,
    open_pool,
    translated_errors,
)
from storage.embedded import start_embedded
from storage.expiry import PgExpiry
from storage.notifications import PgNotifications
from storage.ops import Cancellation, Histogram, MetricsSnapshot, PgOperations, Pruned
from storage.queue import PgResumeQueue
from storage.request_events import RequestEvent, RequestEventHub, RequestEventKind, RequestFeed
from storage.requests import PgApprovalRequests, PgDecisions
from storage.roles import Grant, grant_runtime
from storage.run_events import PgRunEvents, RunEventHub, Subscription
from storage.runs import PgRuns, PgToolLedger
from storage.sessions import PgSessions
from storage.statements import PgStatements
from web.notifier import Notifier
from web.settings import Settings

if TYPE_CHECKING:
    from graphs.examples.effects import SqlSideEffects
    from graphs.registry import GraphRegistry
    from graphs.runner import Runner, RunOutcome
    from graphs.streaming import Publish
    from graphs.worker import ExpirySweeper, Worker

#: The storage types the faces name (in signatures and isinstance checks) and the database's
#: administration (the embedded server, the runtime role's grants), re-exported so that the
#: faces reach storage only through the engine (the import contract in pyproject.toml).
__all__ = [
    "AuditFilter",
    "Cancellation",
    "Engine",
    "Grant",
    "Histogram",
    "MetricsSnapshot",
    "PgRunEvents",
    "RequestEvent",
    "RequestEventKind",
    "RequestFeed",
    "Subscription",
    "Verification",
    "grant_runtime",
    "open_engine",
    "start_embedded",
    "upgrade",
    "valid_run_id",
]

log = logging.getLogger("approvals.engine")


async def upgrade(url: str, *, runtime_role: str | None = None) -> None:
    """Apply the schema's migrations at ``url`` (``storage.migrate.upgrade``): the web app at
    startup, ``approvals db upgrade`` and the commands that migrate first."""
    # Imported here, not at the top: Alembic and LangGraph's checkpointer take a few hundred
    # milliseconds to import, and only what migrates needs them.
    from storage.migrate import upgrade as migrate

    await migrate(url, runtime_role=runtime_role)


def valid_run_id(value: str) -> bool:
    """Whether ``value`` is a run id the engine could have issued (a UUID, canonical form)."""
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


@dataclass(frozen=True)
class _Graphs:
    registry: GraphRegistry
    runner: Runner
    worker: Worker
    sweeper: ExpirySweeper


@dataclass
class Engine:
    """Everything a CLI command, the web app or a test needs, wired once by ``open_engine``.

    The repositories are here for the faces' reads (lists, detail pages, exports); every
    change goes through a use-case method."""

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
    def _graphs(self) -> _Graphs:
        # Function-local on purpose: importing LangGraph takes seconds (see the module's
        # docstring), not to dodge an import loop.
        from graphs.deps import GraphDeps
        from graphs.examples.effects import extras
        from graphs.openai_host.ports import openai_extras
        from graphs.registry import GraphRegistry
        from graphs.runner import Runner
        from graphs.worker import ExpirySweeper, Worker
        from storage.checkpoints import PgResumeChecks, make_saver
        from storage.openai_runs import PgOpenAIRunStates

        saver = make_saver(self._db.pool)
        deps = GraphDeps(
            checkpointer=saver,
            requests=self.requests,
            ledger=self.ledger,
            request_ttl=timedelta(seconds=self.settings.request_ttl_seconds),
            reconcile_group=self.settings.operator_group,
            # The OpenAI-SDK agents' server-side RunStates (docs/openai-agents.md).
            extras={**extras(self.effects), **openai_extras(PgOpenAIRunStates(self._db))},
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

    # -- Use cases -------------------------------------------------------------------------

    async def start_run(
        self,
        graph: str,
        input: Any,
        *,
        principal: Principal | str,
        thread_id: str | None = None,
        observe: Publish | None = None,
    ) -> RunOutcome:
        """Start a run of ``graph`` and return when it finishes or pauses for a human.

        A signed-in ``principal`` may add to a thread only if it started the thread's runs or
        is an operator (a thread is a conversation: adding to it reads its history through the
        agent's answers): ``RunNotAllowed`` otherwise. A plain name is the operator console
        (``approvals runs start --as``), which holds the database and is not refused."""
        if isinstance(principal, Principal) and thread_id is not None:
            last = await self.runs.latest_on_thread(thread_id)
            if (
                last is not None
                and last.started_by != principal.id
                and not self.rules.is_operator(principal)
            ):
                log.warning(
                    "refused a run on thread %r for %s (its runs are %s's)",
                    thread_id,
                    principal.id,
                    last.started_by,
                )
                raise RunNotAllowed(thread_id, "this thread holds another principal's runs")
        started_by = principal.id if isinstance(principal, Principal) else principal
        async with self._starting:
            return await self.runner.start(
                graph, input, principal=started_by, thread_id=thread_id, observe=observe
            )

    @cached_property
    def _starting(self) -> asyncio.Semaphore:
        """How many runs this process starts at once. A starting run holds one pool connection
        for its thread's lock and takes more while its step runs: with as many starts as the
        pool has connections, each held one and waited for another for ever. At most half the
        pool (less two) start at once, so lock holders (these and the worker's resumes, which
        ``check_pool_size`` bounds the same way) never take the whole pool; the rest wait."""
        return asyncio.Semaphore(max(1, (self.settings.pool_max_size - 2) // 2))

    async def decide(
        self,
        request_id: str,
        verdict: Ruling | str,
        *,
        principal: Principal,
        reason: str | None = None,
        args: dict[str, Any] | None = None,
        message: str | None = None,
    ) -> DecisionRecord | Vote:
        """Decide a pending call as the signed-in ``principal`` (its id is the decider).

        The approver rules are applied to the request as it stands when it is consumed, in
        the same transaction (an escalation cannot slip between the check and the decision):
        a request ``principal`` may not see is ``RequestNotFound``, exactly like one that does
        not exist; one it may see but not decide is ``NotAllowed``. Edited arguments are
        checked against the run's policy first (``recheck_edit``); ``message`` is a respond
        decision's answer. Otherwise raises as ``approvals.decisions.decide`` does."""
        found = await self.visible_request(request_id, principal)
        # Refused at once when it can be, before an edit's recheck reads the run's state; the
        # same rules run again on the locked row.
        self.rules.check_decide(principal, found)

        def may_decide(current: PendingCall) -> None:
            if not self.rules.may_see(principal, current):
                raise RequestNotFound(current.id)
            self.rules.check_decide(principal, current)

        return await decide(
            self.requests,
            self.decisions,
            found.id,
            verdict,
            principal=principal.id,
            reason=reason,
            args=args,
            recheck=self.recheck_edit,
            message=message,
            check=may_decide,
            read=found,
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
    ) -> DecisionRecord | Vote:
        """The operator console's decision in ``principal``'s name (``approvals decide --as``).

        Whoever runs the CLI holds the database, so the approver rules do not bind it; the
        decision's audit event records it as an override instead (``override_by``: who
        overrode, ``principal`` when not given), so that ``audit verify`` chains it and a
        reader tells it from a signed-in approver's. Everything else is as ``decide``."""
        return await decide(
            self.requests,
            self.decisions,
            request_id,
            verdict,
            principal=principal,
            reason=reason,
            args=args,
            recheck=self.recheck_edit,
            message=message,
            override_by=override_by or principal,
        )

    async def cancel_run(
        self, run_id: str, *, by: Principal | str, reason: str | None = None
    ) -> Cancellation:
        """Cancel a run that has not ended: its pending requests are cancelled, its queued
        resumes skipped, and the audit log says who and why.

        A signed-in ``by`` must see the run (``RunNotFound`` otherwise, as for an unknown
        one) and be its starter or an operator (``RunNotAllowed``). A plain name is the
        operator console (``approvals runs cancel --as``). Raises ``RunEnded`` when the run
        is over."""
        if isinstance(by, Principal):
            run = await self.visible_run(run_id, by)
            if run.started_by != by.id and not self.rules.is_operator(by):
                log.warning("refused to cancel run %s for %s (not an operator)", run.id, by.id)
                raise RunNotAllowed(run.id, "only the run's starter or an operator may cancel it")
            return await self.operations.cancel(run.id, principal=by.id, reason=reason)
        if not valid_run_id(run_id):
            raise InvalidRunId(run_id)
        return await self.operations.cancel(run_id, principal=by, reason=reason)

    async def report(self, run_id: str, *, viewer: Principal | None = None) -> dict[str, Any]:
        """A run as reports show it: status, requests, tool executions and interception
        records (payload-free). ``viewer``: a signed-in principal, who must see the run
        (``RunNotFound`` otherwise); ``None`` for the operator console, which is told
        ``RunPruned`` (not found, saying so) for a run retention pruned."""
        if viewer is not None:
            run = await self.visible_run(run_id, viewer)
        else:
            if not valid_run_id(run_id):
                raise InvalidRunId(run_id)
            found = await self.runs.get(run_id)
            if found is None:
                if await self.operations.was_pruned(run_id):
                    raise RunPruned(run_id)
                raise RunNotFound(run_id)
            run = found
        requests = await self.requests.for_run(run.id)
        executions = await self.ledger.for_run(run.id)
        interceptions = await self.audit.interceptions(run.id)
        return {
            "run_id": run.id,
            "thread_id": run.thread_id,
            "graph": run.graph,
            "status": run.status.value,
            "started_by": run.started_by,
            "error": run.error,
            "answer": run.answer,
            "pending": [r.id for r in requests if r.status is RequestStatus.PENDING],
            "requests": [
                {"id": r.id, "call_id": r.call_id, "tool": r.tool, "status": r.status.value}
                for r in requests
            ],
            "tool_executions": [e.to_json() for e in executions],
            # Payload-free (AGENT-HOOKS-0.1 §10.3): decisions, reasons and identities only.
            "interceptions": [
                {
                    "sequence": i["sequence"],
                    "point": i["point"],
                    "decision": i["decision"],
                    "reason": i["reason"],
                    "interceptor": i["interceptor"],
                    "mode": i["mode"],
                    "resolved_by": i["resolved_by"],
                    "identity": i["enforced_identity"],
                    "session_id": i["session_id"],
                    "at": i["at"].isoformat(),
                }
                for i in interceptions
            ],
        }

    async def prune(
        self,
        older_than: timedelta,
        *,
        principal: str,
        dry_run: bool = False,
        checkpoints_only: bool = False,
    ) -> Pruned:
        """Retention (``approvals retention prune``): delete what threads whose runs all ended
        more than ``older_than`` ago still hold, LangGraph's checkpoints and, unless
        ``checkpoints_only``, the engine's own rows of those runs, then expired web sessions;
        the audit log stays whole and verifiable, and records the pass in ``principal``'s
        name. ``dry_run`` counts and deletes nothing."""
        return await self.operations.prune(
            older_than, principal=principal, dry_run=dry_run, checkpoints_only=checkpoints_only
        )

    async def work(self, stop: asyncio.Event) -> None:
        """Until ``stop`` is set: resume decided runs, expire (or escalate) requests past
        their deadline, and notify approvers of waiting and escalated requests (what
        ``approvals worker`` and ``approvals serve --with-worker`` run)."""
        graphs = self._graphs
        await asyncio.gather(
            graphs.worker.run(stop), graphs.sweeper.run(stop), self.notifier.run(stop)
        )

    async def drain(self) -> int:
        """Expire what is past its deadline, then resume everything queued; returns how many
        runs were resumed (``approvals worker --drain``)."""
        # Expired requests queue resume jobs: sweep first so the drain resumes them too.
        await self._graphs.sweeper.sweep()
        return await self._graphs.worker.drain()

    # -- What the faces show ---------------------------------------------------------------

    async def visible_request(self, request_id: str, principal: Principal) -> PendingCall:
        """The request, if ``principal`` may see it. A malformed id is ``InvalidRequestId``;
        an unknown one and one it may not see are both ``RequestNotFound``; a request whose
        shown copy changed is ``ShownCopyChanged`` (recorded)."""
        canonical = parse_request_id(request_id)
        found = await self.shown_request(canonical, viewer=principal.id)
        if found is None or not self.rules.may_see(principal, found):
            if found is not None:
                log.warning(
                    "refused to show request %s to %s (not an approver)", found.id, principal.id
                )
            raise RequestNotFound(canonical)
        return found

    async def visible_run(self, run_id: str, principal: Principal) -> Run:
        """The run, if ``principal`` may see it (its starter, an operator, or whoever may see
        one of its requests); ``RunNotFound`` in every other case, malformed ids included."""
        if not valid_run_id(run_id):
            raise RunNotFound(run_id)
        run = await self.runs.get(run_id)
        if run is None or not self.rules.may_see_run(
            principal, run, await self.requests.for_run(run_id)
        ):
            raise RunNotFound(run_id)
        return run

    def viewer(self, principal: Principal | None) -> Viewer:
        """``principal`` as the list queries take it; ``None`` is the operator console (the
        CLI, which holds the database): it sees every request and decides none through a list."""
        if principal is None:
            return Viewer(
                principal="",
                person=None,
                groups=(),
                default_member=False,
                operator=True,
                default_group=self.rules.default_group,
            )
        return Viewer.of(principal, self.rules)

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
        """One page of the pending requests ``principal`` may see (``scope``: all, those it
        may decide, those it may only see), intact ones, each with whether it may decide it;
        soonest deadline first by default. ``cursor``: the previous page's ``next_cursor``
        (``InvalidCursor`` when it is not one issued for this same listing). ``None`` as
        ``principal`` is the operator console, which sees everything."""
        viewer = self.viewer(principal)
        bound = listing_key(f"pending:{scope}:{order}", filters, viewer)
        asof, after = _start(cursor, bound, filters, limit)
        rows = await self.requests.pending_page(
            viewer,
            scope=scope,
            order=order,
            filters=filters,
            asof=asof,
            after=after,
            limit=limit + 1,
        )
        next_cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            key = last.expires_at if order is PendingOrder.DEADLINE else last.created_at
            next_cursor = Cursor(bound=bound, asof=asof, key=key, id=last.id).encode()
        # A request whose shown copy changed is left out (and recorded), as on its own page.
        shown = await self.shown_requests(rows[:limit], viewer=viewer.principal or "cli")
        return Page(
            items=[
                (r, principal is not None and self.rules.may_decide(principal, r)) for r in shown
            ],
            next_cursor=next_cursor,
        )

    async def history_page(
        self,
        principal: Principal,
        *,
        filters: RequestFilter = EVERY_REQUEST,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE,
    ) -> Page[tuple[PendingCall, dict[str, Any]]]:
        """One page of the decided (or expired, superseded, cancelled) requests ``principal``
        may see, newest decision first, each with who decided what and what happened after."""
        viewer = self.viewer(principal)
        bound = listing_key("history", filters, viewer)
        asof, after = _start(cursor, bound, filters, limit)
        rows = await self.requests.decided_page(
            viewer, filters=filters, asof=asof, after=after, limit=limit + 1
        )
        next_cursor = None
        if len(rows) > limit:
            last, _ = rows[limit - 1]
            assert last.decided_at is not None, "decided_page returned an undecided request"
            next_cursor = Cursor(bound=bound, asof=asof, key=last.decided_at, id=last.id).encode()
        return Page(items=rows[:limit], next_cursor=next_cursor)

    async def runs_page(
        self,
        principal: Principal,
        *,
        status: RunStatus | None = None,
        graph: str | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE,
    ) -> Page[Run]:
        """One page of the runs ``principal`` may see (``ApproverRules.may_see_run``: those it
        started, those with a request it may see, every run for an operator), newest first,
        optionally of one status and/or graph."""
        viewer = self.viewer(principal)
        if graph is not None:
            RequestFilter(tool=graph).check()
        bound = listing_key(f"runs:{status}:{graph}", EVERY_REQUEST, viewer)
        asof, after = _start(cursor, bound, EVERY_REQUEST, limit)
        rows = await self.runs.page(
            viewer, status=status, graph=graph, after=after, limit=limit + 1
        )
        next_cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            next_cursor = Cursor(bound=bound, asof=asof, key=last.created_at, id=last.id).encode()
        return Page(items=rows[:limit], next_cursor=next_cursor)

    async def pending_counts(self, principal: Principal | None) -> tuple[int, dict[str, int]]:
        """How many pending requests ``principal`` may see, in all and per approver group
        that may decide them (``None``: the console, every request); at most
        ``COUNTS_MAX_AGE_SECONDS`` old."""
        viewer = self.viewer(principal)
        # The count reads every visible pending request (one GROUP BY over an index: a few
        # hundred milliseconds at a million), and every inbox view and live reload asks for
        # it: principals who see the same requests share one count for a few seconds.
        # A change this process heard of (its live views listen) makes them stale at once, so
        # an inbox reloaded for a new request counts it.
        key = (viewer.operator, viewer.groups if not viewer.operator else (), viewer.default_member)
        now = time.monotonic()
        heard = self.request_streams.generation if "request_streams" in vars(self) else 0
        cached = self._counts.get(key)
        if cached is not None and cached[1] == heard and now - cached[0] < COUNTS_MAX_AGE_SECONDS:
            return cached[2]
        counted = await self.requests.pending_counts(viewer)
        if len(self._counts) > 1000:
            self._counts.clear()
        self._counts[key] = (now, heard, counted)
        return counted

    async def recheck_edit(self, request: PendingCall, args: dict[str, Any]) -> dict[str, Any]:
        """The edited ``args`` as the tool parses them, once the run's policy and the tool's
        preconditions accept them; ``EditRefused`` otherwise (the request stays pending)."""
        # Function-local for the same reason as _graphs: these import LangGraph.
        from graphs.conditions import first_failure
        from graphs.edits import EditOutcome, recheck_edit, successful_counts
        from graphs.tools import ToolCall

        run = await self.runs.get(request.run_id)
        if run is None:
            raise RequestNotFound(request.id)
        registry = self._graphs.registry
        try:
            tool = {t.name: t for t in registry.tools(run.graph)}.get(request.tool)
            governance = registry.governance(run.graph)
        except GraphNotFound as exc:
            raise EditRefused(
                request.id, None, f"the graph {run.graph!r} is not known here"
            ) from exc
        if tool is None or governance is None:
            raise EditRefused(
                request.id, None, f"{request.tool} has no policy to check an edit against here"
            )
        withheld = redacted_paths(request.shown)
        checked = args
        if withheld:
            # The approver edited around values it was not shown: the policy judges the call as
            # it would run, with those values put back (read from the run's own state).
            original = await self._call_args(run.graph, request)
            if original is None:
                raise EditRefused(
                    request.id, None, "the call's withheld arguments cannot be read to check it"
                )
            checked = restore(args, original, withheld)
        try:
            parsed = tool.validate(checked).model_dump(mode="json")
        except ValidationError as exc:
            errors = [
                {"path": "/".join(str(p) for p in e["loc"]), "message": e["msg"]}
                for e in exc.errors()
            ]
            raise EditedArgumentsInvalid(request.id, errors) from exc
        call = ToolCall(
            run_id=request.run_id,
            call_id=request.call_id,
            tool=tool.name,
            idempotency_key=idempotency_key(run_id=request.run_id, call_id=request.call_id),
            principal=request.requested_by,
        )
        failed = await first_failure(tool.preconditions, parsed, call)
        if failed is not None:
            raise EditRefused(request.id, failed.condition, failed.message)
        check = await recheck_edit(
            governance=governance,
            graph=run.graph,
            tool=tool,
            request=request,
            args=parsed,
            tool_counts=successful_counts(await self.ledger.for_run(request.run_id)),
        )
        if check.outcome in (EditOutcome.DENIED, EditOutcome.REWRITTEN):
            raise EditRefused(request.id, check.rule, check.message or check.outcome.value)
        # A redacted request's decision keeps the markers: the withheld values are put back
        # only when the call runs, and never stored with the decision.
        return args if withheld else parsed

    async def _call_args(self, graph: str, request: PendingCall) -> dict[str, Any] | None:
        """The arguments of ``request``'s call as its run holds them, when they are the ones
        the request's identity binds (``None`` otherwise, or when they cannot be found)."""
        registry = self._graphs.registry
        tool = {t.name: t for t in registry.tools(graph)}.get(request.tool)
        snapshot = await registry.get(graph).aget_state(
            {"configurable": {"thread_id": request.thread_id}}
        )
        for message in reversed(snapshot.values.get("messages") or []):
            for call in getattr(message, "tool_calls", None) or []:
                if call.get("id") != request.call_id or tool is None:
                    continue
                try:
                    args: dict[str, Any] = tool.validate(call.get("args") or {}).model_dump(
                        mode="json"
                    )
                except ValidationError:
                    return None
                bound = call_identity(
                    run_id=request.run_id, call_id=request.call_id, tool=tool.name, args=args
                )
                return args if bound == request.identity else None
        return None

    async def shown_request(self, request_id: str, *, viewer: str) -> PendingCall | None:
        """The request, as it may be shown to ``viewer``; ``ShownCopyChanged`` (recorded in
        the audit log) when its shown copy is no longer the one recorded."""
        found = await self.requests.get(request_id)
        if found is not None and not found.shown_intact:
            await self.requests.record_tampered(found, principal=viewer)
            raise ShownCopyChanged(found.id)
        return found

    async def shown_requests(
        self, requests: list[PendingCall], *, viewer: str
    ) -> list[PendingCall]:
        """``requests`` without those whose shown copy changed (each recorded once)."""
        intact = []
        for request in requests:
            if request.shown_intact:
                intact.append(request)
            else:
                await self.requests.record_tampered(request, principal=viewer)
        return intact


#: How old a count of pending requests per group may be when it is shown.
COUNTS_MAX_AGE_SECONDS = 5.0


def _start(
    cursor: str | None, bound: str, filters: RequestFilter, limit: int
) -> tuple[datetime, tuple[datetime, str] | None]:
    """Where a listing's page starts: the first page's moment (now, or the cursor's) and the
    keyset position after which it resumes (``None``: the first page)."""
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidValue("limit", f"must be 1 to {MAX_PAGE}")
    filters.check()
    if cursor is None:
        return datetime.now(UTC), None
    position = Cursor.decode(cursor, bound=bound)
    return position.asof, (position.key, position.id)


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
    engine: Engine | None = None
    try:
        db = Database(pool)
        queue = PgResumeQueue(db, url)
        run_events = PgRunEvents(db)
        notifications = PgNotifications(db)
        engine = Engine(
            url=url,
            settings=settings,
            _db=db,
            rules=ApproverRules(
                default_group=settings.default_approver_group,
                operator_group=settings.operator_group,
            ),
            audit=PgAuditLog(db),
            requests=PgApprovalRequests(db),
            decisions=PgDecisions(db),
            runs=PgRuns(db),
            ledger=PgToolLedger(db),
            queue=queue,
            accounts=PgAccounts(db),
            operations=PgOperations(db),
            expiry=PgExpiry(db),
            notifications=notifications,
            sessions=PgSessions(db),
            run_events=run_events,
            notifier=Notifier.from_settings(notifications, settings, run_events),
        )
        yield engine
    finally:
        if engine is not None and "streams" in engine.__dict__:
            # Only if a stream made it listen.
            await engine.streams.close()
        if engine is not None and "request_streams" in engine.__dict__:
            await engine.request_streams.close()
        if queue is not None:
            await queue.close()
        await pool.close()


def freeze_heap(engine: Engine) -> None:
    """For a long-running process (``approvals serve``, ``approvals worker``), once it is up:
    build what it keeps for its life (the graphs, which import LangGraph), collect, then move
    every object alive into the garbage collector's permanent generation (``gc.freeze``).

    Python's full collection walks every object the process holds, and it comes as often as
    a quarter of that count survives a younger collection: an inbox page of 500 requests
    makes some 10,000 objects, so every few pages a collection walked the 160,000 objects of
    the imported app and LangGraph (tens of milliseconds each, a quarter of a listing's CPU
    under the HTTP load bench). Frozen, they are never walked again; objects made later are
    collected as before. What fails while building the graphs is left to the first run that
    needs them, as without this."""
    try:
        engine.registry  # noqa: B018 -- built now, to be frozen with the rest
    except Exception:  # the first run start raises it again, as it would have without this
        log.warning("could not build the graphs before freezing the heap", exc_info=True)
    gc.collect()
    gc.freeze()
