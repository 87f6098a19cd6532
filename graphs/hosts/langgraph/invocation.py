"""One invocation of a run's graph: the config that carries the engine's bookkeeping, the node
updates it publishes as they happen, and the outcome it settles into (the session's records,
``agent_shutdown`` when the run ended). The LangGraph host (``graphs.hosts.langgraph.host``)
invokes through it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.pregel import Pregel

from approvals.errors import DatabaseUnavailable
from approvals.model import RunStatus
from graphs.hooks.governance import SessionHolder, record_row
from graphs.hosts.base import HostServices
from graphs.hosts.langgraph.agent import close_cancelled
from graphs.hosts.langgraph.streaming import invoke_streaming
from graphs.run.config import engine_configurable
from graphs.run.outcome import RunOutcome, blocked_outcome, foreign_interrupts, outcome_of
from graphs.run.step_events import Publish, StepEvents

log = logging.getLogger("approvals.runner")


async def invoke(
    graph: Pregel[Any, Any, Any, Any],
    payload: Any,
    keys: RunKeys,
    holder: SessionHolder,
    services: HostServices,
) -> RunOutcome:
    """Invoke ``graph`` with ``payload`` for the run ``keys`` names, and settle what it came
    to (``ended``). A database gone away mid-step raises ``DatabaseUnavailable``."""
    run_id, thread_id = keys.run_id, keys.thread_id
    # The engine's bookkeeping travels in the config, not in the graph's state: a host
    # graph (create_agent with ApprovalMiddleware) keeps its own state schema.
    engine = engine_configurable(
        run_id=run_id, principal=keys.principal, graph=keys.graph, deps=services.deps
    )
    config: RunnableConfig = {
        "configurable": {
            **(keys.configurable or {}),
            "thread_id": thread_id,
            **holder.config(),
            **engine,
        },
        # On every LangChain run of the step (LangSmith and other LangChain tracers show it).
        "metadata": tracing_metadata(keys),
    }
    observe = keys.observe
    # The step's node updates are written by its settlement (graphs.run.step_events).
    events = services.events
    updates = StepEvents(run_id, events) if events is not None else None

    async def publish(node: str, data: dict[str, Any]) -> None:
        if updates is not None:
            updates.add(node, data)
        if observe is not None:
            await observe(node, data)

    try:
        outcome = await _invoke_in(
            graph, payload, run_id, thread_id, config, services.transient, keys.context, publish
        )
    except Exception:
        if updates is not None:
            await updates.abandon()
        raise
    finally:
        if updates is not None:
            updates.stop()
    if updates is not None:
        outcome = dataclasses.replace(outcome, events=await updates.take())
    return await ended(holder, outcome)


async def ended(holder: SessionHolder, outcome: RunOutcome) -> RunOutcome:
    """The outcome with the session's records; ``agent_shutdown`` when the run ended."""
    session = holder.session
    if session is None:
        return outcome
    if outcome.status is RunStatus.COMPLETED and session.blocked is not None:
        # A nested agent stopped by a deny: its parent's state does not say so.
        outcome = blocked_outcome(session.blocked, outcome.run_id, outcome.thread_id)
    if outcome.status is not RunStatus.WAITING:
        await session.shutdown(_SHUTDOWN_REASONS.get(outcome.status, "error"))
    return dataclasses.replace(outcome, records=tuple(record_row(r) for r in session.records()))


async def _invoke_in(
    graph: Pregel[Any, Any, Any, Any],
    payload: Any,
    run_id: str,
    thread_id: str,
    config: RunnableConfig,
    transient: Callable[[BaseException], bool],
    context: dict[str, Any] | None = None,
    publish: Publish | None = None,
) -> RunOutcome:
    try:
        # durability="sync": a step's checkpoint is written before the next step starts. With
        # LangGraph's default ("async") a tool step can record a request, or execute, while
        # the checkpoint holding the model's tool calls is still being written; a crash then
        # replays the model, which may propose other calls, and the recorded call is
        # orphaned (or a different call repeats its effect).
        # Streamed, so that each node update is published as it happens
        # (graphs.hosts.langgraph.streaming).
        result = await invoke_streaming(
            graph, payload, config, context=context, publish=publish or _ignore
        )
    except Exception as exc:  # a host failure stops the run, visibly
        if isinstance(exc, DatabaseUnavailable) or transient(exc):
            # The database went away mid-step: nothing is lost (the step re-runs from its
            # checkpoint), so leave the run as it is for the job to be retried.
            raise DatabaseUnavailable(f"{type(exc).__name__}: {exc}") from exc
        log.exception("run %s failed", run_id, extra={"run_id": run_id})
        error = f"{type(exc).__name__}: {exc}"[:1000]
        return RunOutcome(run_id=run_id, thread_id=thread_id, status=RunStatus.FAILED, error=error)
    foreign = await foreign_interrupts(graph, config, result)
    if foreign is not None:
        log.error("run %s: %s", run_id, foreign, extra={"run_id": run_id})
        # Nothing will ever answer that interrupt: close the steps waiting on the thread
        # (as for a cancelled run) so that it takes new input.
        notice = f"Run {run_id} failed: it stopped on an interrupt() nobody can answer."
        await close_cancelled(graph, {"configurable": {"thread_id": thread_id}}, notice)
        return RunOutcome(
            run_id=run_id, thread_id=thread_id, status=RunStatus.FAILED, error=foreign
        )
    return outcome_of(result, run_id, thread_id)


@dataclass(frozen=True, kw_only=True, slots=True)
class RunKeys:
    """Which run an invocation serves: what the runner's config carries to the graph."""

    run_id: str
    thread_id: str
    principal: str
    graph: str
    context: dict[str, Any] | None = None
    configurable: dict[str, Any] | None = None
    #: Given each node update as it happens, besides the run's event sink.
    observe: Publish | None = None
    #: The decided request a resume serves (none for a start).
    request_id: str | None = None


def tracing_metadata(keys: RunKeys) -> dict[str, str]:
    """What LangChain's tracers (LangSmith) are told of the step: the engine's run, thread,
    graph, and the request a resume serves."""
    found = {
        "approvals_run_id": keys.run_id,
        "approvals_thread_id": keys.thread_id,
        "approvals_graph": keys.graph,
        "approvals_request_id": keys.request_id,
    }
    return {k: v for k, v in found.items() if v is not None}


async def _ignore(node: str, data: dict[str, Any]) -> None:
    return None


_SHUTDOWN_REASONS = {
    RunStatus.COMPLETED: "completed",
    # summary.reason is completed | error | cancelled (AGENT-HOOKS-0.1 §4.2): a run a policy
    # stopped ended in error, as far as the contract is concerned.
    RunStatus.BLOCKED: "error",
    RunStatus.FAILED: "error",
}
