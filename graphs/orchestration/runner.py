"""Starting and resuming runs: one step of a thread at a time, under the thread's lock.

A new message is governed (``agent_startup``, ``input``) before the graph is invoked, so that
no checkpoint holds a message ``input`` denied or masked (``graphs.run.admission``). After every
invocation the runner settles the run from what the graph returned: the interrupts
it stopped on (each names its approval request, whose interrupt id is recorded) or its final
answer. Before resuming, it checks in the checkpoint that the decided call still waits.

The run's input is read in ``graphs.run.input``, an invocation of the graph is
``graphs.hosts.langgraph.invocation`` and what it came to is ``graphs.run.outcome``.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.pregel import Pregel
from langgraph.types import Command

from approvals.errors import DatabaseUnavailable, InvalidRunInput, ThreadBusy
from approvals.json_values import check_inputs
from approvals.model import JobStatus, ResumeCheck, ResumeJob, RunStatus
from approvals.ports import ClaimedJob, NewRun, ResumeChecks, Runs
from graphs.hooks.approval import decided_beforehand
from graphs.hooks.governance import SessionHolder
from graphs.hosts.langgraph.agent import close_cancelled
from graphs.hosts.langgraph.invocation import GraphInvoker, RunKeys
from graphs.hosts.langgraph.streaming import Publish
from graphs.hosts.registry import GraphRegistry
from graphs.run.admission import (
    HELD_INPUT_CALL,
    Admission,
    InputHeld,
    emit_held_input,
    input_gate,
)
from graphs.run.config import RUN_ID_KEY, EngineRun
from graphs.run.input import GraphInput, parse_graph_input, parse_input
from graphs.run.outcome import RunOutcome, blocked_outcome, complete_job, outcome_of, request_of
from graphs.run.step_events import RunEventSink

if TYPE_CHECKING:
    from graphs.hosts.openai.runner import OpenAIRunner


class Runner(GraphInvoker):
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
    ) -> RunOutcome:
        """Start a run of ``graph_name`` as ``principal``; returns when it finishes or pauses.
        ``observe`` is given each node update as it happens (``approvals runs start --stream``)."""
        # Before anything is written (the run row, a checkpoint): InvalidValue names the field.
        await self._registry.load(graph_name)
        hosted = self._registry.openai(graph_name)
        if hosted is not None:
            return await self._openai().start(
                hosted, input, principal=principal, thread_id=thread_id
            )
        check_inputs(input=input, thread_id=thread_id, principal=principal)
        if thread_id is not None and not (0 < len(thread_id) <= 200):
            raise InvalidRunInput("thread id must be 1 to 200 characters")
        graph = self._registry.get(graph_name)
        gate = input_gate(graph)
        given = GraphInput(message="", state={})
        if gate is not None and gate.input_fields is not None:
            given = parse_graph_input(input, gate.input_fields, takes_context=gate.takes_context)
            message = given.message
        else:
            message = parse_input(input)
        run_id = str(uuid.uuid4())
        given_thread = thread_id is not None
        thread_id = thread_id or run_id
        holder = SessionHolder()
        if gate is None:
            admission = Admission(
                state={
                    "messages": [HumanMessage(content=message)],
                    "run_id": run_id,
                    "started_by": principal,
                    "new_input": True,
                    "blocked": None,
                },
                message=message,
            )
        else:
            # agent_startup and input, before anything is written: LangGraph checkpoints a
            # graph's input before its first node runs, so a denied message must never reach
            # the graph (nor the run's row), and a masked one only masked.
            admission = await gate.admit(
                holder, run_id=run_id, principal=principal, message=message
            )

        async def refuse_if_waiting() -> None:
            config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
            state = await graph.aget_state(config)
            if not state.next:
                held = await self._runs.latest_on_thread(thread_id)
                if held is not None and held.status is RunStatus.WAITING:
                    # Its input is held for a human (graphs.run.admission): it goes first.
                    raise ThreadBusy(thread_id)
                return
            last = await self._runs.latest_on_thread(thread_id)
            if last is not None and last.status is RunStatus.CANCELLED:
                # The waiting steps belong to a cancelled run, which will never resume: close
                # them (its waiting calls answer "cancelled") and let the thread go on.
                notice = f"Run {last.id} was cancelled ({last.error or 'no reason given'})."
                if await close_cancelled(graph, config, notice):
                    return
            # New input would start past the calls still waiting for a human.
            raise ThreadBusy(thread_id)

        # The run's row keeps the input as admitted: nothing of a denied one.
        kept = {"message": admission.message} if admission.message is not None else {}
        if admission.state is not None:
            kept.update(given.kept())
        if admission.held:
            # What the graph starts with once the message is approved.
            kept.update(given.state)
        new = NewRun(
            run_id=run_id,
            thread_id=thread_id,
            graph=graph_name,
            started_by=principal,
            input=kept,
            new_thread=not given_thread,
        )
        # A thread the runner just made up cannot be waiting: no need to look.
        keys = RunKeys(
            run_id=run_id,
            thread_id=thread_id,
            principal=principal,
            graph=graph_name,
            context=given.context,
            configurable=given.configurable,
            observe=observe,
        )
        async with self._runs.begin(new, check=refuse_if_waiting if given_thread else None) as run:
            if admission.state is None:
                blocked = blocked_outcome(admission.blocked or {}, run_id, thread_id)
                outcome = await self._ended(holder, blocked)
            elif admission.held:
                outcome = await self._hold(
                    graph,
                    holder,
                    {**given.state, **admission.state},
                    keys,
                    message,
                )
            else:
                try:
                    outcome = await self._invoke(
                        graph,
                        # The graph's own input keys beside the message, as given.
                        {**given.state, **admission.state},
                        keys,
                        holder,
                    )
                except DatabaseUnavailable as exc:
                    # A resume is retried by its job; nothing retries a start, so a run left
                    # "running" would stay so for ever. It fails, visibly. (If the database is
                    # really gone, writing that fails too, and the error reaches the caller.)
                    error = str(exc)[:1000]
                    failed = RunOutcome(
                        run_id=run_id, thread_id=thread_id, status=RunStatus.FAILED, error=error
                    )
                    outcome = await self._ended(holder, failed)
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
        await self._registry.load(job.graph)
        hosted = self._registry.openai(job.graph)
        if hosted is not None:
            return await self._openai().resume(hosted, claimed, check)
        graph = self._registry.get(job.graph)
        config: RunnableConfig = {"configurable": {"thread_id": job.thread_id}}
        if job.call_id == HELD_INPUT_CALL and not await _started_by(graph, config, job.run_id):
            return await self._release_held(claimed, graph, check)
        # A held input whose graph already started (its job is run again: retried, or its
        # worker died before the step settled) goes on like any resume, from where the graph
        # is: handing it the message again would give the agent the user's turn twice.
        payload: Any = await self._resume_payload(graph, config, job, check.interrupt_id)
        if isinstance(payload, _Finished):
            settled = outcome_of(payload.values, job.run_id, job.thread_id)
            await claimed.complete(JobStatus.SKIPPED, None, settled.settlement)
            return None
        holder = SessionHolder(first_sequence=check.next_sequence)
        keys = RunKeys(
            run_id=job.run_id,
            thread_id=job.thread_id,
            principal=check.started_by,
            graph=job.graph,
            # LangGraph checkpoints neither: the run's row kept them.
            context=check.run_input.get("context"),
            configurable=check.run_input.get("configurable"),
        )
        with decided_beforehand(check.decided):
            outcome = await self._invoke(graph, payload, keys, holder)
        await complete_job(claimed, outcome)
        return outcome

    def _openai(self) -> OpenAIRunner:
        """Where OpenAI Agents SDK runs go: the same runs, lock and queue, the SDK's loop."""
        # Function-local: only a registry holding an SDK agent gets here, and only then is
        # the SDK imported.
        from graphs.hosts.openai.runner import OpenAIRunner

        return OpenAIRunner(deps=self._registry.deps, runs=self._runs, transient=self._transient)

    async def _hold(
        self,
        graph: Pregel[Any, Any, Any, Any],
        holder: SessionHolder,
        state: dict[str, Any],
        keys: RunKeys,
        message: str,
    ) -> RunOutcome:
        """Record a held input's request (the run waits on it, the graph not invoked); should
        ``input`` not wait after all, the graph starts with the message as it left it."""
        session = holder.session
        if session is None:
            raise RuntimeError("a held input has no session")
        try:
            content, blocked = await emit_held_input(session, self._engine_run(keys), message)
        except InputHeld as held:
            waiting = RunOutcome(
                run_id=keys.run_id,
                thread_id=keys.thread_id,
                status=RunStatus.WAITING,
                waiting_on=((held.request_id, HELD_INPUT_CALL),),
            )
            return await self._ended(holder, waiting)
        return await self._start_held(graph, holder, state, keys, content, blocked)

    async def _release_held(
        self, claimed: ClaimedJob, graph: Pregel[Any, Any, Any, Any], check: ResumeCheck
    ) -> RunOutcome | None:
        """A held input's decision: ask ``input`` again (answered from the stored decision)
        and start the graph with the message as approved, or end the run blocked."""
        job = claimed.job
        given = check.run_input
        gate = input_gate(graph)
        if check.run_status is None or gate is None or not isinstance(given.get("message"), str):
            await claimed.complete(JobStatus.FAILED, "the held input cannot be read", None)
            return None
        message = given["message"]
        own = {k: v for k, v in given.items() if k not in ("message", "context", "configurable")}
        keys = RunKeys(
            run_id=job.run_id,
            thread_id=job.thread_id,
            principal=check.started_by,
            graph=job.graph,
            context=given.get("context"),
            configurable=given.get("configurable"),
        )
        holder = SessionHolder(first_sequence=check.next_sequence)
        session = holder.get(
            gate.governance, graph=job.graph, run_id=job.run_id, principal=check.started_by
        )
        try:
            content, blocked = await emit_held_input(session, self._engine_run(keys), message)
        except InputHeld:
            # No decision for it (the job outran it): the run keeps waiting.
            await claimed.complete(JobStatus.SKIPPED, "the held input is not decided", None)
            return None
        outcome = await self._start_held(graph, holder, own, keys, content, blocked)
        await complete_job(claimed, outcome)
        return outcome

    async def _start_held(
        self,
        graph: Pregel[Any, Any, Any, Any],
        holder: SessionHolder,
        state: dict[str, Any],
        keys: RunKeys,
        content: Any,
        blocked: dict[str, Any] | None,
    ) -> RunOutcome:
        if blocked is not None:
            return await self._ended(holder, blocked_outcome(blocked, keys.run_id, keys.thread_id))
        gate = input_gate(graph)
        admitted = {**state, "messages": [HumanMessage(content=content)]}
        if gate is not None:
            admitted = {**state, **gate.state_for([HumanMessage(content=content)])}
        return await self._invoke(graph, admitted, keys, holder)

    def _engine_run(self, keys: RunKeys) -> EngineRun:
        return EngineRun(
            run_id=keys.run_id,
            principal=keys.principal,
            graph=keys.graph,
            thread_id=keys.thread_id,
            deps=self._registry.deps,
            state_version=None,
        )

    async def _resume_payload(
        self,
        graph: Pregel[Any, Any, Any, Any],
        config: RunnableConfig,
        job: ResumeJob,
        interrupt_id: str | None,
    ) -> Any:
        """What to resume the thread with: the decided call's pending interrupt, the thread's
        unfinished step, or nothing."""
        ref = {"request_id": job.request_id, "decision_id": job.decision_id}
        if interrupt_id is not None:
            return Command(resume={interrupt_id: ref})
        # Not waiting: find out why, from the full state (the rare path).
        state = await graph.aget_state(config)
        for task in state.tasks:
            for intr in task.interrupts:
                if request_of(intr) == job.request_id:
                    return Command(resume={intr.id: ref})
        if state.tasks:
            # The thread has unfinished steps and this call no longer waits: the process
            # running it died after the request was recorded but before its interrupt was
            # checkpointed, or after the call was answered but before the graph went on.
            # Continue the thread: calls read their decisions from the database, finished
            # tasks are not run again, and the ledger keeps every call to one execution.
            return None
        # The graph ended (a sibling's resume finished it, or a worker died after the last
        # checkpoint but before it settled the run): nothing to run, but the run is settled
        # from the final state so that it never stays "waiting".
        return _Finished(state.values if isinstance(state.values, dict) else {})


async def _started_by(
    graph: Pregel[Any, Any, Any, Any], config: RunnableConfig, run_id: str
) -> bool:
    """Whether the thread's latest checkpoint was written by run ``run_id`` (LangGraph keeps
    the run's ``configurable`` strings, ours among them, in each checkpoint's metadata)."""
    metadata = (await graph.aget_state(config)).metadata or {}
    return metadata.get(RUN_ID_KEY) == run_id


@dataclasses.dataclass(frozen=True)
class _Finished:
    """The thread's graph has ended; ``values`` is its final state."""

    values: dict[str, Any]
