"""A LangGraph graph as an ``AgentHost``: a ``build_agent`` agent, a ``create_agent`` agent with
``ApprovalMiddleware``, or any graph with a ``GovernedToolNode``.

A new message is governed (``agent_startup``, ``input``) before the graph is invoked, so that
no checkpoint holds a message ``input`` denied or masked (``graphs.run.admission``); one that
waits for a human is held (``graphs.hosts.langgraph.held``). Each invocation is settled from
what the graph returned (``graphs.hosts.langgraph.invocation``): the interrupts it stopped on
(each names its approval request, whose interrupt id is recorded) or its final answer. Before
resuming, the host checks in the checkpoint that the decided call still waits.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.pregel import Pregel
from langgraph.types import Command

from approvals.errors import DatabaseUnavailable
from approvals.model import JobStatus, ResumeCheck, ResumeJob, RunStatus
from graphs.hooks.approval import decided_beforehand
from graphs.hooks.governance import Governance, SessionHolder
from graphs.hosts.base import FirstStep, HostServices, JobEnd, RunStart
from graphs.hosts.langgraph.agent import close_cancelled
from graphs.hosts.langgraph.held import hold, release_held
from graphs.hosts.langgraph.invocation import RunKeys, ended, invoke
from graphs.run.admission import HELD_INPUT_CALL, Admission, InputGate, input_gate
from graphs.run.config import RUN_ID_KEY
from graphs.run.input import GraphInput, parse_graph_input, parse_input
from graphs.run.outcome import RunOutcome, blocked_outcome, outcome_of, request_of
from graphs.tool_call.tools import GovernedTool, ToolCatalog


class LangGraphHost:
    """A registered LangGraph graph: ``graph`` compiled with the engine's checkpointer, its
    governed tools and governance in ``catalog`` under ``name``."""

    kind = "a LangGraph graph"

    def __init__(self, name: str, graph: Pregel[Any, Any, Any, Any], catalog: ToolCatalog) -> None:
        self.name = name
        self.graph = graph
        self._catalog = catalog

    async def start(self, run: RunStart, services: HostServices) -> FirstStep:
        gate = input_gate(self.graph)
        given = GraphInput(message="", state={})
        if gate is not None and gate.input_fields is not None:
            given = parse_graph_input(
                run.input, gate.input_fields, takes_context=gate.takes_context
            )
            message = given.message
        else:
            message = parse_input(run.input)
        holder = SessionHolder()
        admission = await _admit(gate, holder, run, message)
        keys = RunKeys(
            run_id=run.run_id,
            thread_id=run.thread_id,
            principal=run.principal,
            graph=self.name,
            context=given.context,
            configurable=given.configurable,
            observe=run.observe,
        )

        async def first() -> RunOutcome:
            return await self._first_step(admission, given, keys, holder, message, services)

        return FirstStep(input=_kept(admission, given), run=first)

    async def resume(
        self, job: ResumeJob, check: ResumeCheck, services: HostServices
    ) -> RunOutcome | JobEnd:
        graph = self.graph
        config: RunnableConfig = {"configurable": {"thread_id": job.thread_id}}
        if job.call_id == HELD_INPUT_CALL and not await _started_by(graph, config, job.run_id):
            return await release_held(graph, job, check, services)
        # A held input whose graph already started (its job is run again: retried, or its
        # worker died before the step settled) goes on like any resume, from where the graph
        # is: handing it the message again would give the agent the user's turn twice.
        payload: Any = await _resume_payload(graph, config, job, check.interrupt_id)
        if isinstance(payload, _Finished):
            settled = outcome_of(payload.values, job.run_id, job.thread_id)
            return JobEnd(status=JobStatus.SKIPPED, settlement=settled.settlement)
        holder = SessionHolder(first_sequence=check.next_sequence)
        keys = RunKeys(
            run_id=job.run_id,
            thread_id=job.thread_id,
            principal=check.started_by,
            graph=job.graph,
            # LangGraph checkpoints neither: the run's row kept them.
            context=check.run_input.get("context"),
            configurable=check.run_input.get("configurable"),
            request_id=job.request_id,
        )
        with decided_beforehand(check.decided):
            return await invoke(graph, payload, keys, holder, services)

    async def waiting(self, thread_id: str) -> bool:
        state = await self.graph.aget_state({"configurable": {"thread_id": thread_id}})
        return bool(state.next)

    async def close_waiting(self, thread_id: str, notice: str) -> bool:
        return await close_cancelled(self.graph, {"configurable": {"thread_id": thread_id}}, notice)

    def tools(self) -> list[GovernedTool]:
        """Empty for a graph not built with ``build_agent`` nor ``ApprovalMiddleware``."""
        return list(self._catalog.for_graph(self.name))

    def describe_tools(self) -> list[dict[str, Any]]:
        return [t.describe() for t in self.tools()]

    def edit_governance(self) -> Governance | None:
        """``None`` for a graph not built with ``build_agent`` nor ``ApprovalMiddleware``."""
        found = self._catalog.governance_of(self.name)
        return found if isinstance(found, Governance) else None

    async def _first_step(
        self,
        admission: Admission,
        given: GraphInput,
        keys: RunKeys,
        holder: SessionHolder,
        message: str,
        services: HostServices,
    ) -> RunOutcome:
        if admission.state is None:
            blocked = blocked_outcome(admission.blocked or {}, keys.run_id, keys.thread_id)
            return await ended(holder, blocked)
        # The graph's own input keys beside the message, as given.
        state = {**given.state, **admission.state}
        if admission.held:
            return await hold(self.graph, holder, state, keys, message, services)
        try:
            return await invoke(self.graph, state, keys, holder, services)
        except DatabaseUnavailable as exc:
            # A resume is retried by its job; nothing retries a start, so a run left
            # "running" would stay so for ever. It fails, visibly. (If the database is
            # really gone, writing that fails too, and the error reaches the caller.)
            error = str(exc)[:1000]
            failed = RunOutcome(
                run_id=keys.run_id, thread_id=keys.thread_id, status=RunStatus.FAILED, error=error
            )
            return await ended(holder, failed)


async def _admit(
    gate: InputGate | None, holder: SessionHolder, run: RunStart, message: str
) -> Admission:
    """``agent_startup`` and ``input``, before anything is written: LangGraph checkpoints a
    graph's input before its first node runs, so a denied message must never reach the graph
    (nor the run's row), and a masked one only masked. A graph with no gate (none of its
    nodes governs its input) gets the message as given, for its nodes to govern."""
    if gate is None:
        return Admission(
            state={
                "messages": [HumanMessage(content=message)],
                "run_id": run.run_id,
                "started_by": run.principal,
                "new_input": True,
                "blocked": None,
            },
            message=message,
        )
    return await gate.admit(holder, run_id=run.run_id, principal=run.principal, message=message)


def _kept(admission: Admission, given: GraphInput) -> dict[str, Any]:
    """What the run's row keeps of the input: the input as admitted, nothing of a denied one."""
    kept = {"message": admission.message} if admission.message is not None else {}
    if admission.state is not None:
        kept.update(given.kept())
    if admission.held:
        # What the graph starts with once the message is approved.
        kept.update(given.state)
    return kept


async def _resume_payload(
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
