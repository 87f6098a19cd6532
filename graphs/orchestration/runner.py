"""Starting and resuming runs: one step of a thread at a time, under the thread's lock.

What every run shares is here, whatever framework its agent is built with: the run's row,
written with the thread's lock held (and a thread that still waits refused), the settlement of
the run when its step ends, and the resume job, completed with what its run came to. What
differs by framework (admitting an input, running a step, resuming a decided call, closing a
cancelled run's waiting steps) is the agent's host (``graphs.hosts.base.AgentHost``), which the
registry finds by name.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Any

from approvals.errors import InvalidRunId, InvalidRunInput, ThreadBusy
from approvals.json_values import check_inputs
from approvals.model import JobStatus, RunStatus
from approvals.ports import ClaimedJob, NewRun, ResumeChecks, Runs
from approvals.tracing import annotate, run_span
from graphs.hosts.base import AgentHost, HostServices, JobEnd, RunStart
from graphs.hosts.registry import GraphRegistry
from graphs.run.outcome import RunOutcome, complete_job
from graphs.run.step_events import Publish, RunEventSink


class Runner:
    def __init__(
        self,
        *,
        registry: GraphRegistry,
        runs: Runs,
        checks: ResumeChecks,
        transient: Callable[[BaseException], bool] = lambda exc: False,
        events: RunEventSink | None = None,
    ) -> None:
        self._checks = checks
        self._events = events
        self._transient = transient
        self._registry = registry
        self._runs = runs

    async def start(
        self,
        graph_name: str,
        input: Any,
        *,
        principal: str,
        thread_id: str | None = None,
        observe: Publish | None = None,
        run_id: str | None = None,
    ) -> RunOutcome:
        """Start a run of ``graph_name`` as ``principal``; returns when it finishes or pauses.
        ``observe`` is given each node update as it happens (``approvals runs start --stream``).
        ``run_id``: the new run's id, chosen by a caller that follows the run before its row
        is written; a canonical UUID (``InvalidRunId`` otherwise) that no run has. By
        default the runner makes one."""
        # Before anything is written (the run row, a checkpoint): InvalidValue names the field.
        host = await self._registry.load(graph_name)
        check_inputs(input=input, thread_id=thread_id, principal=principal)
        if thread_id is not None and not (0 < len(thread_id) <= 200):
            raise InvalidRunInput("thread id must be 1 to 200 characters")
        if run_id is None:
            run_id = str(uuid.uuid4())
        elif not _is_uuid(run_id):
            raise InvalidRunId(run_id)
        given_thread = thread_id is not None
        thread_id = thread_id or run_id
        start = RunStart(
            run_id=run_id, thread_id=thread_id, principal=principal, input=input, observe=observe
        )
        with run_span(
            "approvals.run.start",
            run_id,
            thread_id=thread_id,
            graph=graph_name,
            principal=principal,
        ) as span:
            outcome = await self._first_step(host, start, given_thread, graph_name)
            annotate(span, status=outcome.status.value)
        return outcome

    async def _first_step(
        self, host: AgentHost, start: RunStart, given_thread: bool, graph_name: str
    ) -> RunOutcome:
        """The run's row begun and its first step run under the thread's lock."""
        run_id, thread_id, principal = start.run_id, start.thread_id, start.principal
        first = await host.start(start, self._services())
        new = NewRun(
            run_id=run_id,
            thread_id=thread_id,
            graph=graph_name,
            started_by=principal,
            input=first.input,
            new_thread=not given_thread,
        )
        # A thread the runner just made up cannot be waiting: no need to look.
        check = functools.partial(self._refuse_if_waiting, host, thread_id)
        async with self._runs.begin(new, check=check if given_thread else None) as run:
            outcome = await first.run()
            run.settle(outcome.settlement)
        return outcome

    async def resume(self, claimed: ClaimedJob) -> RunOutcome | None:
        """Resume the run of a claimed job, if its interrupt is still pending.

        The caller holds the job (and with it the thread's lock) until this returns.
        """
        job = claimed.job
        check = await self._checks.begin(job)
        if check.run_status is RunStatus.CANCELLED:
            # Read under the thread's lock, which a cancellation also takes: a run cancelled
            # before this claim is never resumed, whatever decision queued the job.
            await claimed.complete(JobStatus.SKIPPED, "run cancelled")
            return None
        host = await self._registry.load(job.graph)
        with run_span(
            "approvals.resume", job.run_id, graph=job.graph, request_id=job.request_id
        ) as span:
            resumed = await host.resume(job, check, self._services())
            annotate(span, status=resumed.status.value)
        if isinstance(resumed, JobEnd):
            await claimed.complete(resumed.status, resumed.error, resumed.settlement)
            return None
        await complete_job(claimed, resumed)
        return resumed

    async def _refuse_if_waiting(self, host: AgentHost, thread_id: str) -> None:
        """Refuse (``ThreadBusy``) new input on a thread that waits for a human: new input
        would start past the calls still waiting. Run under the thread's lock, before the new
        run's row is written."""
        if not await host.waiting(thread_id):
            held = await self._runs.latest_on_thread(thread_id)
            if held is not None and held.status is RunStatus.WAITING:
                # Its last run waits on a decision (or its input is held for a human,
                # graphs.run.admission): it goes first.
                raise ThreadBusy(thread_id)
            return
        last = await self._runs.latest_on_thread(thread_id)
        if last is not None and last.status is RunStatus.CANCELLED:
            # The waiting steps belong to a cancelled run, which will never resume: close
            # them (its waiting calls answer "cancelled") and let the thread go on.
            notice = f"Run {last.id} was cancelled ({last.error or 'no reason given'})."
            if await host.close_waiting(thread_id, notice):
                return
        raise ThreadBusy(thread_id)

    def _services(self) -> HostServices:
        """What a host runs a step with (the registry's deps as they are now)."""
        return HostServices(
            deps=self._registry.deps,
            runs=self._runs,
            transient=self._transient,
            events=self._events,
        )


def _is_uuid(value: str) -> bool:
    """Whether ``value`` is a UUID in canonical form (the form of the ids the runner makes)."""
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False
