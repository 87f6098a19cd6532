"""Starting and resuming runs: one step of a thread at a time, state read back after each.

After every invocation the runner reads the checkpoint back, attaches each pending interrupt's
id and the checkpoint version to its approval request, and records the run's status.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.pregel import Pregel
from langgraph.types import Command

from approvals.errors import DatabaseUnavailable, InvalidRunInput, RunNotFound, ThreadBusy
from approvals.model import JobStatus, RunStatus
from approvals.ports import ApprovalRequests, ClaimedJob, Runs, ThreadLocks
from graphs.registry import GraphRegistry

log = logging.getLogger("approvals.runner")

MAX_MESSAGE_LENGTH = 20_000


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOutcome:
    run_id: str
    thread_id: str
    status: RunStatus
    pending: list[str] = field(default_factory=list)
    error: str | None = None
    answer: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "status": self.status.value,
            "pending": self.pending,
            "error": self.error,
            "answer": self.answer,
        }


def parse_input(value: Any) -> str:
    """Run input is ``{"message": "..."}``."""
    if not isinstance(value, dict):
        raise InvalidRunInput('input must be a JSON object like {"message": "..."}')
    unknown = set(value) - {"message"}
    if unknown:
        raise InvalidRunInput(f"unknown input field(s): {', '.join(sorted(unknown))}")
    message = value.get("message")
    if not isinstance(message, str) or not message.strip():
        raise InvalidRunInput('"message" must be a non-empty string')
    if len(message) > MAX_MESSAGE_LENGTH:
        raise InvalidRunInput(f'"message" is longer than {MAX_MESSAGE_LENGTH} characters')
    return message


class Runner:
    def __init__(
        self,
        *,
        registry: GraphRegistry,
        runs: Runs,
        requests: ApprovalRequests,
        locks: ThreadLocks,
        transient: Callable[[BaseException], bool] = lambda exc: False,
    ) -> None:
        self._transient = transient
        self._registry = registry
        self._runs = runs
        self._requests = requests
        self._locks = locks

    async def start(
        self, graph_name: str, input: Any, *, principal: str, thread_id: str | None = None
    ) -> RunOutcome:
        """Start a run of ``graph_name`` as ``principal``; returns when it finishes or pauses."""
        message = parse_input(input)
        if thread_id is not None and not (0 < len(thread_id) <= 200):
            raise InvalidRunInput("thread id must be 1 to 200 characters")
        graph = self._registry.get(graph_name)
        run_id = str(uuid.uuid4())
        thread_id = thread_id or run_id
        payload = {
            "messages": [HumanMessage(content=message)],
            "run_id": run_id,
            "started_by": principal,
        }
        async with self._locks.hold(thread_id):
            state = await graph.aget_state({"configurable": {"thread_id": thread_id}})
            if state.next:
                # New input would start past the calls still waiting for a human.
                raise ThreadBusy(thread_id)
            await self._runs.create(
                run_id=run_id,
                thread_id=thread_id,
                graph=graph_name,
                started_by=principal,
                input=input,
            )
            return await self._invoke(graph, payload, run_id, thread_id)

    async def resume(self, claimed: ClaimedJob) -> RunOutcome | None:
        """Resume the run of a claimed job, if its interrupt is still pending.

        The caller holds the job (and with it the thread's lock) until this returns.
        """
        job = claimed.job
        run = await self._runs.get(job.run_id)
        if run is None:
            raise RunNotFound(job.run_id)
        graph = self._registry.get(run.graph)
        config: RunnableConfig = {"configurable": {"thread_id": job.thread_id}}
        state = await graph.aget_state(config)
        interrupt_id = next(
            (
                i.id
                for task in state.tasks
                for i in task.interrupts
                if isinstance(i.value, dict) and i.value.get("request_id") == job.request_id
            ),
            None,
        )
        payload: Any
        if interrupt_id is not None:
            ref = {"request_id": job.request_id, "decision_id": job.decision_id}
            payload = Command(resume={interrupt_id: ref})
        elif state.next and not any(task.interrupts for task in state.tasks):
            # A step was cut short by a crash after the request was recorded and before its
            # interrupt was checkpointed: continue the step. Its tool calls read their
            # decisions from the database, and the ledger keeps each to one execution.
            payload = None
        else:
            # Already resumed (by a sibling call's resume, or a worker that died after the
            # checkpoint): nothing to do, and doing it again would be the double execution.
            await claimed.complete(JobStatus.SKIPPED)
            return None
        await self._runs.set_status(run.id, RunStatus.RUNNING)
        outcome = await self._invoke(graph, payload, run.id, job.thread_id)
        await claimed.complete(
            JobStatus.FAILED if outcome.status is RunStatus.FAILED else JobStatus.DONE,
            outcome.error,
        )
        return outcome

    async def _invoke(
        self, graph: Pregel[Any, Any, Any, Any], payload: Any, run_id: str, thread_id: str
    ) -> RunOutcome:
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        try:
            await graph.ainvoke(payload, config)
        except Exception as exc:  # a host failure stops the run, visibly
            if isinstance(exc, DatabaseUnavailable) or self._transient(exc):
                # The database went away mid-step: nothing is lost (the step re-runs from its
                # checkpoint), so leave the run as it is for the job to be retried.
                raise DatabaseUnavailable(f"{type(exc).__name__}: {exc}") from exc
            log.exception("run %s failed", run_id)
            error = f"{type(exc).__name__}: {exc}"[:1000]
            await self._runs.set_status(run_id, RunStatus.FAILED, error)
            return RunOutcome(
                run_id=run_id, thread_id=thread_id, status=RunStatus.FAILED, error=error
            )
        return await self.settle(graph, run_id, thread_id)

    async def settle(
        self, graph: Pregel[Any, Any, Any, Any], run_id: str, thread_id: str
    ) -> RunOutcome:
        """Read the checkpoint back: bind interrupts to their requests, record the status."""
        state = await graph.aget_state({"configurable": {"thread_id": thread_id}})
        version = state.config.get("configurable", {}).get("checkpoint_id")
        pending: list[str] = []
        for task in state.tasks:
            for intr in task.interrupts:
                if isinstance(intr.value, dict) and "request_id" in intr.value:
                    request_id = str(intr.value["request_id"])
                    await self._requests.attach_interrupt(request_id, intr.id, version)
                    pending.append(request_id)
        status = RunStatus.WAITING if pending else RunStatus.COMPLETED
        if not pending and state.next:
            status = RunStatus.WAITING
        answer = None
        messages = state.values.get("messages") if isinstance(state.values, dict) else None
        if status is RunStatus.COMPLETED and messages:
            content = messages[-1].content
            answer = content if isinstance(content, str) else None
        await self._runs.set_status(run_id, status, answer=answer)
        return RunOutcome(
            run_id=run_id, thread_id=thread_id, status=status, pending=pending, answer=answer
        )
