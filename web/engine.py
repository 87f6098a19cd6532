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

from pydantic import ValidationError

from approvals.decisions import decide
from approvals.errors import (
    EditedArgumentsInvalid,
    EditRefused,
    GraphNotFound,
    RequestNotFound,
    ShownCopyChanged,
)
from approvals.identity import call_identity, idempotency_key
from approvals.model import ApprovalRequest, Decision, Verdict, Vote
from approvals.redaction import redacted_paths, restore
from storage.accounts import PgAccounts
from storage.audit import PgAuditLog
from storage.db import Database, check_connection, is_transient, open_pool, translated_errors
from storage.notifications import PgNotifications
from storage.queue import PgResumeQueue
from storage.requests import PgApprovalRequests, PgDecisions
from storage.run_events import PgRunEvents, RunEventHub
from storage.runs import PgRuns, PgToolLedger
from storage.statements import PgStatements
from web.notify import Notifier
from web.settings import Settings

if TYPE_CHECKING:
    from graphs.examples.effects import SqlSideEffects
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
    queue: PgResumeQueue
    accounts: PgAccounts
    #: Tells people when calls wait or are escalated; run by the worker processes.
    notifier: Notifier

    @cached_property
    def _graphs(self) -> _Graphs:
        from graphs.deps import GraphDeps
        from graphs.examples.effects import extras
        from graphs.registry import GraphRegistry
        from graphs.runner import Runner
        from graphs.worker import Worker
        from storage.checkpoints import PgResumeChecks, make_saver

        saver = make_saver(self.db.pool)
        deps = GraphDeps(
            checkpointer=saver,
            requests=self.requests,
            ledger=self.ledger,
            extras=extras(self.effects),
            request_ttl=timedelta(seconds=self.settings.request_ttl_seconds),
            reconcile_group=self.settings.operator_group,
        )
        registry = GraphRegistry(deps, self.settings.graph_entries())
        runner = Runner(
            registry=registry,
            runs=self.runs,
            checks=PgResumeChecks(self.db, saver.serde),
            transient=is_transient,
            events=self.run_events.publish,
        )
        worker = Worker(
            runner=runner, queue=self.queue, concurrency=self.settings.worker_concurrency
        )
        return _Graphs(registry=registry, runner=runner, worker=worker)

    @cached_property
    def effects(self) -> SqlSideEffects:
        """The examples' side-effect log (their own table, ``graphs/examples/schema.sql``),
        given to their graphs in ``GraphDeps.extras``; tests and the demo read it back."""
        # Function-local for the same reason as _graphs: the examples import LangGraph.
        from graphs.examples.effects import SqlSideEffects

        return SqlSideEffects(PgStatements(self.db))

    @cached_property
    def streams(self) -> RunEventHub:
        """Wakes this process's run event streams (one LISTEN connection, made on first use)."""
        return RunEventHub(self.url)

    @cached_property
    def run_events(self) -> PgRunEvents:
        """What runs' steps produced, for streams and run notifications."""
        return PgRunEvents(self.db)

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
        message: str | None = None,
    ) -> Decision | Vote:
        """Decide a pending call as an already-authenticated ``principal``; edited arguments
        are checked against the run's policy first (``recheck_edit``); ``message`` is a
        respond decision's answer."""
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
        )

    async def recheck_edit(self, request: ApprovalRequest, args: dict[str, Any]) -> dict[str, Any]:
        """The edited ``args`` as the tool parses them, once the run's policy and the tool's
        preconditions accept them; ``EditRefused`` otherwise (the request stays pending)."""
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

    async def _call_args(self, graph: str, request: ApprovalRequest) -> dict[str, Any] | None:
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

    async def shown_request(self, request_id: str, *, viewer: str) -> ApprovalRequest | None:
        """The request, as it may be shown to ``viewer``; ``ShownCopyChanged`` (recorded in
        the audit log) when its shown copy is no longer the one recorded."""
        found = await self.requests.get(request_id)
        if found is not None and not found.shown_intact:
            await self.requests.record_tampered(found, principal=viewer)
            raise ShownCopyChanged(found.id)
        return found

    async def shown_requests(
        self, requests: list[ApprovalRequest], *, viewer: str
    ) -> list[ApprovalRequest]:
        """``requests`` without those whose shown copy changed (each recorded once)."""
        intact = []
        for request in requests:
            if request.shown_intact:
                intact.append(request)
            else:
                await self.requests.record_tampered(request, principal=viewer)
        return intact


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
        audit = PgAuditLog(db)
        requests = PgApprovalRequests(db)
        runs = PgRuns(db)
        ledger = PgToolLedger(db)
        queue = PgResumeQueue(db, url)
        engine = Engine(
            url=url,
            settings=settings,
            db=db,
            audit=audit,
            requests=requests,
            decisions=PgDecisions(db),
            runs=runs,
            ledger=ledger,
            queue=queue,
            accounts=PgAccounts(db),
            notifier=Notifier.from_settings(PgNotifications(db), settings, PgRunEvents(db)),
        )
        yield engine
    finally:
        if engine is not None and "streams" in engine.__dict__:
            # Only if a stream made it listen.
            await engine.streams.close()
        if queue is not None:
            await queue.close()
        await pool.close()
