"""The run use cases: start a run (``start_run``), cancel one or retry its failed resumes
(``cancel_run``, ``retry_run``), report on one (``report``), retention (``prune``), and the
worker's loop (``work``, ``drain``). Who may act on a run is decided here, for every caller."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from approvals.errors import (
    ApprovalsError,
    InvalidRunId,
    InvalidValue,
    RequestNotPending,
    RunEnded,
    RunNotAllowed,
    RunNotFound,
    RunPruned,
)
from approvals.model import PendingCall, RequestStatus, Run, RunStatus
from approvals.principals import Principal
from storage.ops import Cancellation, Pruned, Retry
from storage.run_events import Subscription
from web.engine.adapters import Adapters
from web.engine.agents import AgentSide
from web.engine.reads import ReadUseCases, valid_run_id
from web.engine.starts import start_place
from web.engine.workers import heartbeat

if TYPE_CHECKING:
    from graphs.hosts.langgraph.streaming import Publish
    from graphs.run.outcome import RunOutcome

log = logging.getLogger("approvals.engine")


class RunUseCases:
    """Starting, cancelling, retrying, reporting on and pruning runs (this module's
    docstring)."""

    def __init__(self, adapters: Adapters, reads: ReadUseCases, agents: AgentSide) -> None:
        self._adapters = adapters
        self._rules = adapters.rules
        self._reads = reads
        self._agents = agents
        # How many of this process's calls hold or wait for a thread's lock at once: runs
        # starting, and cancels and retries (which wait for a step in progress to settle).
        # Each holds a pool connection throughout: with as many starts as the pool has
        # connections, each held one and waited for another for ever. At most half the pool
        # (less two) at once, so lock holders (these and the worker's resumes, which
        # ``check_pool_size`` bounds the same way) never take the whole pool; the rest wait
        # here, holding nothing.
        self._lock_holders = asyncio.Semaphore(max(1, (adapters.settings.pool_max_size - 2) // 2))
        # Runs started in the background (``start_in_background``), held until they end.
        self._background: set[asyncio.Task[RunOutcome]] = set()

    async def start_run(
        self,
        graph: str,
        input: Any,
        *,
        principal: Principal | str,
        thread_id: str | None = None,
        observe: Publish | None = None,
        run_id: str | None = None,
    ) -> RunOutcome:
        """Start a run of ``graph`` and return when it finishes or pauses for a human.
        ``run_id``: the new run's id, a UUID the caller chose (``Runner.start``).

        A signed-in ``principal`` may add to a thread only if it started the thread's runs or
        is an operator (a thread is a conversation: adding to it reads its history through the
        agent's answers): ``RunNotAllowed`` otherwise. A plain name is the operator console
        (``approvals runs start --as``), which holds the database and is not refused.
        ``StartsBusy`` when no place to start came free in time (``web.engine.starts``)."""
        if isinstance(principal, Principal) and thread_id is not None:
            last = await self._adapters.runs.latest_on_thread(thread_id)
            if (
                last is not None
                and not self._rules.started(principal, last)
                and not self._rules.is_operator(principal)
            ):
                log.warning(
                    "refused a run on thread %r for %s (its runs are %s's)",
                    thread_id,
                    principal.id,
                    last.started_by,
                )
                raise RunNotAllowed(thread_id, "this thread holds another principal's runs")
        started_by = principal.id if isinstance(principal, Principal) else principal
        # Past the wait, refused (StartsBusy, a 503) before anything is written.
        async with start_place(self._lock_holders, self._adapters.settings.start_wait_seconds):
            return await self._agents.graphs.runner.start(
                graph,
                input,
                principal=started_by,
                thread_id=thread_id,
                observe=observe,
                run_id=run_id,
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
            may=lambda run, who: self._rules.started(who, run) or self._rules.is_operator(who),
            why="only the run's starter or an operator may cancel it",
        )
        async with self._lock_holders:
            return await self._adapters.operations.cancel(run, principal=principal, reason=reason)

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
            may=lambda run, who: self._rules.is_operator(who),
            why="only an operator may retry a run's resumes",
        )
        async with self._lock_holders:
            return await self._adapters.operations.retry(run, principal=principal, reason=reason)

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
            run = await self._reads.visible_run(run_id, by)
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
        run = await self._reported(run_id, viewer)
        adapters = self._adapters
        requests = await adapters.requests.for_run(run.id)
        executions = await adapters.ledger.for_run(run.id)
        interceptions = await adapters.audit.interceptions(run.id)
        # What the run says is its starter's and operators': an approver gets none of it.
        readable = viewer is None or self._rules.may_read_run(viewer, run)
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

    async def _reported(self, run_id: str, viewer: Principal | None) -> Run:
        """The run ``report`` is of, as ``viewer`` may see it (``report`` says how)."""
        if viewer is not None:
            return await self._reads.visible_run(run_id, viewer)
        if not valid_run_id(run_id):
            raise InvalidRunId(run_id)
        found = await self._adapters.runs.get(run_id)
        if found is None:
            if await self._adapters.operations.was_pruned(run_id):
                raise RunPruned(run_id)
            raise RunNotFound(run_id)
        return found

    async def start_in_background(
        self,
        graph: str,
        input: Any,
        *,
        principal: Principal,
        thread_id: str,
        run_id: str,
        sub: Subscription,
    ) -> Run:
        """Start a run of ``graph`` on ``thread_id`` as ``start_run`` does, without waiting for
        its step: its row, once recorded. What the start raises before that is raised here;
        what its step raises after is logged (the run's row records how it ended).

        ``run_id``: the new run's id (a fresh UUID); ``sub``: a subscription to its events,
        taken before the start. Writing the run's row publishes its first event (the runs
        table's status trigger), which wakes ``sub``: the row is read then."""
        task = asyncio.create_task(
            self.start_run(graph, input, principal=principal, thread_id=thread_id, run_id=run_id)
        )
        self._background.add(task)
        task.add_done_callback(self._background_ended)
        while True:
            # Until the row's event wakes ``sub`` or the start ends (a minute at most: the
            # row is read again then, should its notification have been lost).
            woken = asyncio.create_task(sub.wait(60))
            try:
                await asyncio.wait({task, woken}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                woken.cancel()
            found = await self._adapters.runs.get(run_id)
            if found is not None:
                return found
            if task.done():
                task.result()  # the start's error, raised before its row was written
                raise RunNotFound(run_id)  # pragma: no cover - a started run has its row
            # Woken without the row: the hub lost its connection, and wakes every stream.

    def _background_ended(self, task: asyncio.Task[RunOutcome]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("a run started in the background failed: %s", task.exception())

    async def thread_state(
        self, run: Run, principal: Principal, *, values: bool = True
    ) -> dict[str, Any]:
        """The state of ``run``'s thread as ``principal`` may see it (the run is one it may
        see): ``values``, ``next`` and ``checkpoint_id`` (the graph's own state, for the run's
        starter and operators only: an approver sees the run through its requests), and
        ``interrupts``: each pending call it may see (or of the run it started), ``{id,
        value}``, the value HumanInTheLoopMiddleware's ``HITLRequest`` with the engine's
        fields, the arguments as shown to approvers. ``values=False``: the interrupts only
        (the graph's state is not read)."""
        # Function-local: importing the agent side imports LangGraph (web/engine/agents.py).
        from graphs.hooks.hitl import payload

        readable = self._rules.may_read_run(principal, run)
        pending = [
            r
            for r in await self._adapters.requests.for_run(run.id)
            if r.status is RequestStatus.PENDING and (readable or self._rules.may_see(principal, r))
        ]
        shown = await self._reads.shown_requests(pending, viewer=principal.id)
        interrupts = [
            {"id": r.interrupt_id or r.id, "value": payload(r, "batched")}
            for r in sorted(shown, key=lambda r: r.created_at)
        ]
        state: Any = {}
        following: list[str] = []
        checkpoint_id = None
        if readable and values:
            state, following, checkpoint_id = await self._graph_state(run)
        return {
            "values": state,
            "next": following,
            "checkpoint_id": checkpoint_id,
            "interrupts": interrupts,
        }

    async def _graph_state(self, run: Run) -> tuple[Any, list[str], str | None]:
        """The LangGraph state of ``run``'s thread (values, next nodes, checkpoint id); empty
        for an agent of another framework, or a graph no longer registered."""
        from graphs.hosts.langgraph.host import LangGraphHost

        try:
            host = await self._agents.graphs.registry.load(run.graph)
        except ApprovalsError:
            return {}, [], None
        if not isinstance(host, LangGraphHost):
            return {}, [], None
        snapshot = await host.graph.aget_state({"configurable": {"thread_id": run.thread_id}})
        checkpoint = (snapshot.config.get("configurable") or {}).get("checkpoint_id")
        return jsonable(snapshot.values), list(snapshot.next), checkpoint

    async def resume_plan(
        self, thread_id: str, resume: Any, principal: Principal
    ) -> tuple[Run, list[tuple[str, dict[str, Any]]]]:
        """A HITL resume value (``hitl_pairs``) sent to ``thread_id`` as the engine's
        decisions: the waiting run, and for each call it decides, its request id and
        ``decide``'s arguments (``verdict``, ``reason``, ``args``, ``message``). Who decides
        is not checked here: ``decide`` applies every rule. ``RunNotFound`` for a thread
        ``principal`` may not see; ``RequestNotPending`` when nothing waits on it any more;
        ``InvalidValue`` for a value that is no HITL response."""
        from graphs.hooks.hitl import InvalidHitlDecision, ruled

        run = await self._reads.visible_thread(thread_id, principal)
        if run is None:
            raise RunNotFound(thread_id)
        requests = sorted(await self._adapters.requests.for_run(run.id), key=lambda r: r.created_at)
        pending = [r for r in requests if r.status is RequestStatus.PENDING]
        if run.status is not RunStatus.WAITING or not pending:
            if requests:
                raise RequestNotPending(requests[-1].id, requests[-1].status.value)
            raise RunEnded(run.id, run.status.value)
        plan = []
        for request, decision in hitl_pairs(resume, pending):
            try:
                ruling = ruled(decision, request.tool)
            except InvalidHitlDecision as exc:
                raise InvalidValue("command.resume", str(exc)) from exc
            if ruling.tool is not None:
                raise InvalidValue("command.resume", "an edit may not name another tool")
            fields = {"verdict": ruling.ruling, "reason": ruling.reason, "args": ruling.args}
            plan.append((request.id, {**fields, "message": ruling.message}))
        return run, plan

    async def last_event(self, run_id: str) -> int:
        """The id of ``run_id``'s latest event (0: none yet)."""
        after = 0
        while True:
            rows = await self._adapters.run_events.after(run_id, after, 500)
            if rows:
                after = rows[-1]["id"]
            if len(rows) < 500:
                return after

    async def step_events(
        self, run_id: str, after: int, sub: Subscription, seconds: float
    ) -> AsyncIterator[dict[str, Any]]:
        """``run_id``'s events after event ``after``, as they are recorded, until the one that
        says a step settled (its status recorded as waiting or over, or a failed resume),
        which is the last; or until ``seconds`` pass. ``sub``: a subscription to its events,
        taken before ``after`` was read."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while True:
            rows = await self._adapters.run_events.after(run_id, after, 500)
            for row in rows:
                after = row["id"]
                yield row
                status = (row.get("data") or {}).get("status")
                if row["kind"] == "resume_failed" or (
                    row["kind"] == "status" and status in SETTLED
                ):
                    return
            left = deadline - loop.time()
            if left <= 0:
                return
            if len(rows) < 500:
                await sub.wait(min(left, 1.0))

    async def settled(self, run_id: str, after: int, sub: Subscription, seconds: float) -> Run:
        """Wait until a step of ``run_id`` settles after event ``after`` (``step_events``),
        at most ``seconds``; the run as it is then."""
        async for _ in self.step_events(run_id, after, sub, seconds):
            pass
        return await self._settled_run(run_id)

    async def join(self, run_id: str, sub: Subscription, seconds: float) -> Run:
        """The run once its step in progress settles (at once if it waits or is over), at
        most ``seconds``; ``sub``: a subscription to its events."""
        mark = await self.last_event(run_id)
        now = await self._settled_run(run_id)
        if now.status in SETTLED:
            return now
        return await self.settled(run_id, mark, sub, seconds)

    async def _settled_run(self, run_id: str) -> Run:
        found = await self._adapters.runs.get(run_id)
        if found is None:
            raise RunNotFound(run_id)
        return found

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
        return await self._adapters.operations.prune(
            older_than, principal=principal, dry_run=dry_run, checkpoints_only=checkpoints_only
        )

    async def work(self, stop: asyncio.Event) -> None:
        """Until ``stop`` is set: resume decided runs, expire (or escalate) requests past
        their deadline, notify approvers, and say which graphs this worker serves (what
        ``approvals worker`` and ``approvals serve --with-worker`` run)."""
        graphs, db = self._agents.graphs, self._adapters.db
        await asyncio.gather(
            graphs.worker.run(stop),
            graphs.sweeper.run(stop),
            self._adapters.notifier.run(stop),
            heartbeat(db, graphs.registry, stop),
        )

    async def drain(self) -> int:
        """Expire what is past its deadline, then resume everything queued; returns how many
        runs were resumed (``approvals worker --drain``)."""
        graphs = self._agents.graphs
        await graphs.sweeper.sweep()  # expired requests queue jobs: the drain resumes them too
        return await graphs.worker.drain()


#: The run statuses a step settles in: it waits for a human, or the run is over.
SETTLED = frozenset(
    {
        RunStatus.WAITING,
        RunStatus.COMPLETED,
        RunStatus.BLOCKED,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
    }
)


def jsonable(value: Any) -> Any:
    """``value`` (a graph's state: messages and plain values) as JSON values: a pydantic
    model (a message) as its ``model_dump``, anything else unknown as its text."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return jsonable(dump())
    return str(value)


def hitl_pairs(resume: Any, pending: list[PendingCall]) -> list[tuple[PendingCall, Any]]:
    """A HITL resume value paired with the pending calls it decides: ``{"decisions": [...]}``
    (one per call, in the order the interrupts are listed), or a map keyed by interrupt id
    (or request id) whose values are ``{"decisions": [one]}`` or one decision.
    ``InvalidValue`` for anything else."""
    if not isinstance(resume, Mapping) or not resume:
        raise InvalidValue("command.resume", 'must be {"decisions": [...]} or a map by interrupt')
    if set(resume) == {"decisions"}:
        decisions = resume["decisions"]
        if not isinstance(decisions, list) or len(decisions) != len(pending):
            raise InvalidValue(
                "command.resume.decisions",
                f"must be a list of {len(pending)} decision(s), one per waiting interrupt",
            )
        return list(zip(pending, decisions, strict=True))
    pairs = []
    for key, value in resume.items():
        found = [r for r in pending if key in (r.interrupt_id, r.id)]
        if not found:
            raise InvalidValue("command.resume", f"no interrupt {str(key)[:80]!r} waits here")
        if isinstance(value, Mapping) and set(value) == {"decisions"}:
            listed = value["decisions"]
            if not isinstance(listed, list) or len(listed) != 1:
                raise InvalidValue("command.resume", "an interrupt takes exactly one decision")
            value = listed[0]
        pairs.append((found[0], value))
    return pairs
