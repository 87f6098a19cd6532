"""The application layer: one method per use case, and the composition root that wires them.

Every face (the JSON API, the pages, the CLI, the web app's worker) does what it does through
an ``Engine``: it translates its input to a call here and the result (or the error's category)
back. The use cases are ``start_run``, ``decide`` (and the console's ``decide_as_operator``),
``cancel_run``, ``report``, ``work`` and ``drain``; the approver rules are applied here, for
every caller. ``open_engine`` builds the pool and every adapter once; nothing else builds one.

``Engine`` is four modules, one concept each: this one (the use cases and the composition root),
``web.engine_wiring`` (what the engine holds: its adapters, and the LangGraph side, built on
first use), ``web.engine_reads`` (what the faces show) and ``web.engine_edits`` (an approver's
edit, checked against the run's policy). The faces import it, and every name they need, from
here.

The LangGraph side (saver, registry, runner, worker) is built on first use: importing LangGraph
takes seconds, and most CLI commands (decide, pending, audit, users, ...) never need it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from approvals.authz import ApproverRules
from approvals.decisions import decide
from approvals.errors import (
    InvalidRunId,
    InvalidValue,
    RequestNotFound,
    RunNotAllowed,
    RunNotFound,
    RunPruned,
)
from approvals.model import DecisionRecord, PendingCall, RequestStatus, Ruling, Run, Vote
from approvals.principals import Principal, console_name
from storage.accounts import PgAccounts
from storage.audit import AuditFilter, PgAuditLog, Verification
from storage.db import Database, check_connection, open_pool, translated_errors
from storage.embedded import start_embedded
from storage.expiry import PgExpiry
from storage.notifications import PgNotifications
from storage.ops import Cancellation, Histogram, MetricsSnapshot, PgOperations, Pruned, Retry
from storage.queue import PgResumeQueue
from storage.request_events import RequestEvent, RequestEventKind, RequestFeed
from storage.requests import PgApprovalRequests, PgDecisions
from storage.roles import Grant, grant_runtime
from storage.run_events import PgRunEvents, Subscription
from storage.runs import PgRuns, PgToolLedger
from storage.sessions import PgSessions
from web.engine_edits import EngineEdits
from web.engine_reads import EngineReads, valid_run_id
from web.notifier import Notifier
from web.settings import Settings

if TYPE_CHECKING:
    from graphs.hosts.langgraph.streaming import Publish
    from graphs.run.outcome import RunOutcome

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


class Engine(EngineReads, EngineEdits):
    """Everything a CLI command, the web app or a test needs, wired once by ``open_engine``.

    The repositories are here for the faces' reads (lists, detail pages, exports); every
    change goes through a use-case method."""

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
                and not self.rules.started(principal, last)
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
        async with self._lock_holders:
            return await self.runner.start(
                graph, input, principal=started_by, thread_id=thread_id, observe=observe
            )

    @cached_property
    def _lock_holders(self) -> asyncio.Semaphore:
        """How many of this process's calls hold or wait for a thread's lock at once: runs
        starting, and cancels and retries (which wait for a step in progress to settle). Each
        holds a pool connection throughout: with as many starts as the pool has connections,
        each held one and waited for another for ever. At most half the pool (less two) at
        once, so lock holders (these and the worker's resumes, which ``check_pool_size`` bounds
        the same way) never take the whole pool; the rest wait here, holding nothing."""
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
            require_reason=self.settings.require_reject_reason,
        )

    async def console_principal(self, text: str, *, deciding: bool = False) -> str:
        """The principal id the operator console's ``--as TEXT`` names
        (``approvals.principals.ConsoleName``): ``NAME`` and ``local:NAME`` are that local
        account, which must exist and be enabled, so that one person is never two principals;
        ``KIND:NAME`` spells any other out. ``deciding``: also refuse a principal that is no
        person (``cli:deploy-bot``), which never decides. Raises ``InvalidValue``."""
        named = console_name(text)
        if named.account is not None:
            account = await self.accounts.user(named.account)
            if account is None:
                raise InvalidValue(
                    "principal",
                    f"{text[:200]!r} names no account: create it (approvals users add), or"
                    " write a principal that is no person as KIND:NAME (e.g. cli:deploy-bot)",
                )
            if account.disabled:
                raise InvalidValue("principal", f"the account {named.account!r} is disabled")
        if deciding and not named.is_person:
            raise InvalidValue(
                "principal",
                f"{text[:200]!r} is no person, and only a person decides: name the account"
                " (or oidc:ISSUER#SUBJECT) the decision is made for",
            )
        return named.principal

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
            require_reason=self.settings.require_reject_reason,
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
        run, principal = await self._acted_on(
            run_id,
            by,
            "cancel",
            may=lambda run, who: self.rules.started(who, run) or self.rules.is_operator(who),
            why="only the run's starter or an operator may cancel it",
        )
        async with self._lock_holders:
            return await self.operations.cancel(run, principal=principal, reason=reason)

    async def retry_run(
        self, run_id: str, *, by: Principal | str, reason: str | None = None
    ) -> Retry:
        """Queue again the failed resumes of a run that waits, once what made them fail is
        gone; the audit log says who and why, and the ledger still runs each call once.

        A signed-in ``by`` must see the run (``RunNotFound`` otherwise, as for an unknown
        one) and be an operator (``RunNotAllowed``): a retry acts on decisions, which a
        run's starter does not own. A plain name is the operator console (``approvals runs
        retry --as``). Raises ``NothingToRetry`` when the run is not waiting or none of its
        resumes failed."""
        run, principal = await self._acted_on(
            run_id,
            by,
            "retry",
            may=lambda run, who: self.rules.is_operator(who),
            why="only an operator may retry a run's resumes",
        )
        async with self._lock_holders:
            return await self.operations.retry(run, principal=principal, reason=reason)

    async def _acted_on(
        self,
        run_id: str,
        by: Principal | str,
        verb: str,
        *,
        may: Callable[[Run, Principal], bool],
        why: str,
    ) -> tuple[str, str]:
        """The run an operator's action names and who acts: a signed-in ``by`` must see the run
        (``RunNotFound`` otherwise, as for an unknown one) and be one ``may`` lets act
        (``RunNotAllowed``, saying ``why``); a plain name is the operator console, whose run id
        is only checked for its form (``InvalidRunId``)."""
        if isinstance(by, Principal):
            run = await self.visible_run(run_id, by)
            if not may(run, by):
                log.warning("refused to %s run %s for %s", verb, run.id, by.id)
                raise RunNotAllowed(run.id, why)
            return run.id, by.id
        if not valid_run_id(run_id):
            raise InvalidRunId(run_id)
        return run_id, by

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
        # What the run says is its starter's and operators': an approver gets none of it.
        readable = viewer is None or self.rules.may_read_run(viewer, run)
        return {
            "run_id": run.id,
            "thread_id": run.thread_id,
            "graph": run.graph,
            "status": run.status.value,
            "started_by": run.started_by,
            "error": run.error if readable else None,
            "answer": run.answer if readable else None,
            "pending": [r.id for r in requests if r.status is RequestStatus.PENDING],
            "requests": [
                {"id": r.id, "call_id": r.call_id, "tool": r.tool, "status": r.status.value}
                for r in requests
            ],
            "tool_executions": [
                e.to_json() if readable else {**e.to_json(), "error": None} for e in executions
            ],
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
