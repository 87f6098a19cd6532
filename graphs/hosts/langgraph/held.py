"""A new run's input held for a human (``graphs.run.admission``): the request it waits on, and
the graph started with the message as approved once it is decided.

``input`` may escalate a message: the run waits on that request with the graph not invoked
(LangGraph would checkpoint the message before any node ran), and the decision's job asks
``input`` again, answered from the stored decision.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.pregel import Pregel

from approvals.model import JobStatus, ResumeCheck, ResumeJob, RunStatus
from graphs.hooks.governance import SessionHolder
from graphs.hosts.base import HostServices, JobEnd
from graphs.hosts.langgraph.invocation import RunKeys, ended, invoke
from graphs.run.admission import HELD_INPUT_CALL, InputHeld, emit_held_input, input_gate
from graphs.run.config import EngineRun
from graphs.run.outcome import RunOutcome, blocked_outcome


async def hold(
    graph: Pregel[Any, Any, Any, Any],
    holder: SessionHolder,
    state: dict[str, Any],
    keys: RunKeys,
    message: str,
    services: HostServices,
) -> RunOutcome:
    """Record a held input's request (the run waits on it, the graph not invoked); should
    ``input`` not wait after all, the graph starts with the message as it left it."""
    session = holder.session
    if session is None:
        raise RuntimeError("a held input has no session")
    run = _engine_run(keys, services)
    try:
        content, blocked = await emit_held_input(session, run, message)
    except InputHeld as held:
        waiting = RunOutcome(
            run_id=keys.run_id,
            thread_id=keys.thread_id,
            status=RunStatus.WAITING,
            waiting_on=((held.request_id, HELD_INPUT_CALL),),
        )
        return await ended(holder, waiting)
    return await _start_held(graph, holder, state, keys, content, blocked, services)


async def release_held(
    graph: Pregel[Any, Any, Any, Any],
    job: ResumeJob,
    check: ResumeCheck,
    services: HostServices,
) -> RunOutcome | JobEnd:
    """A held input's decision: ask ``input`` again (answered from the stored decision)
    and start the graph with the message as approved, or end the run blocked."""
    given = check.run_input
    gate = input_gate(graph)
    if check.run_status is None or gate is None or not isinstance(given.get("message"), str):
        return JobEnd(status=JobStatus.FAILED, error="the held input cannot be read")
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
        content, blocked = await emit_held_input(session, _engine_run(keys, services), message)
    except InputHeld:
        # No decision for it (the job outran it): the run keeps waiting.
        return JobEnd(status=JobStatus.SKIPPED, error="the held input is not decided")
    return await _start_held(graph, holder, own, keys, content, blocked, services)


async def _start_held(
    graph: Pregel[Any, Any, Any, Any],
    holder: SessionHolder,
    state: dict[str, Any],
    keys: RunKeys,
    content: Any,
    blocked: dict[str, Any] | None,
    services: HostServices,
) -> RunOutcome:
    if blocked is not None:
        return await ended(holder, blocked_outcome(blocked, keys.run_id, keys.thread_id))
    gate = input_gate(graph)
    admitted = {**state, "messages": [HumanMessage(content=content)]}
    if gate is not None:
        admitted = {**state, **gate.state_for([HumanMessage(content=content)])}
    return await invoke(graph, admitted, keys, holder, services)


def _engine_run(keys: RunKeys, services: HostServices) -> EngineRun:
    return EngineRun(
        run_id=keys.run_id,
        principal=keys.principal,
        graph=keys.graph,
        thread_id=keys.thread_id,
        deps=services.deps,
        state_version=None,
    )
