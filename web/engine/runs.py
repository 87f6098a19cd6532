"""The run use cases: start a run (``start_run``), cancel one or retry its failed resumes
(``cancel_run``, ``retry_run``), report on one (``report``), retention (``prune``), and the
worker's loop (``work``, ``drain``). Who may act on a run is decided here, for every caller."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from approvals.errors import InvalidRunId, RunNotAllowed, RunNotFound, RunPruned
from approvals.model import RequestStatus, Run
from approvals.principals import Principal
from storage.ops import Cancellation, Pruned, Retry
from web.engine.adapters import Adapters
from web.engine.agents import AgentSide
from web.engine.reads import ReadUseCases, valid_run_id

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
        async with self._lock_holders:
            return await self._agents.graphs.runner.start(
                graph, input, principal=started_by, thread_id=thread_id, observe=observe
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
        their deadline, and notify approvers of waiting and escalated requests (what
        ``approvals worker`` and ``approvals serve --with-worker`` run)."""
        graphs = self._agents.graphs
        await asyncio.gather(
            graphs.worker.run(stop), graphs.sweeper.run(stop), self._adapters.notifier.run(stop)
        )

    async def drain(self) -> int:
        """Expire what is past its deadline, then resume everything queued; returns how many
        runs were resumed (``approvals worker --drain``)."""
        # Expired requests queue resume jobs: sweep first so the drain resumes them too.
        graphs = self._agents.graphs
        await graphs.sweeper.sweep()
        return await graphs.worker.drain()
