"""What a run came to after an invocation: the interrupts it stopped on (each names its
approval request, whose interrupt id is recorded) or its final answer, or why it stopped; and
the resume job closed with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.pregel import Pregel

from approvals.model import JobStatus, RunStatus
from approvals.ports import ClaimedJob, Settlement
from graphs.run.step_events import StepUpdates
from graphs.run.structured import StructuredAnswer


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOutcome:
    run_id: str
    thread_id: str
    status: RunStatus
    error: str | None = None
    answer: str | None = None
    waiting_on: tuple[tuple[str, str], ...] = ()
    records: tuple[dict[str, Any], ...] = ()
    #: The step's node updates its settlement writes (``graphs.run.step_events``).
    events: StepUpdates = ()

    @property
    def pending(self) -> list[str]:
        """The approval requests the run waits on."""
        return [request_id for request_id, _ in self.waiting_on]

    @property
    def settlement(self) -> Settlement:
        return Settlement(
            run_id=self.run_id,
            status=self.status,
            error=self.error,
            answer=self.answer,
            waiting_on=self.waiting_on,
            records=self.records,
            events=self.events,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "status": self.status.value,
            "pending": self.pending,
            "error": self.error,
            "answer": self.answer,
        }


INTERRUPT_CHANNEL = "__interrupt__"


def request_of(intr: Any) -> str | None:
    value = getattr(intr, "value", None)
    if isinstance(value, dict) and isinstance(value.get("request_id"), str):
        return str(value["request_id"])
    return None


async def foreign_interrupts(
    graph: Pregel[Any, Any, Any, Any], config: RunnableConfig, result: Any
) -> str | None:
    """Why the run cannot wait, when it stopped on an ``interrupt()`` the engine did not
    create (a tool's or a node's own, or another middleware's): no approval request names it,
    so nothing could ever decide it and the run would wait forever. The error names the node."""
    values = result if isinstance(result, dict) else {}
    foreign = [i for i in values.get(INTERRUPT_CHANNEL) or [] if request_of(i) is None]
    if not foreign:
        return None
    ids = {str(getattr(i, "id", "")) for i in foreign}
    state = await graph.aget_state(config, subgraphs=True)
    nodes = sorted(_nodes_waiting_on(state, ids)) or ["unknown"]
    value = repr(getattr(foreign[0], "value", None))[:200]
    return (
        f"the run stopped on an interrupt() the engine did not create, in node "
        f"{', '.join(nodes)} (value {value}): nothing can decide it. Pause for a human through "
        "the engine instead (ApprovalMiddleware interrupt_on, a policy, or a sensitive "
        "governed tool)"
    )[:1000]


def _nodes_waiting_on(state: Any, ids: set[str]) -> set[str]:
    """The names of the tasks (in subgraphs too) holding one of the interrupts ``ids``."""
    names: set[str] = set()
    for task in getattr(state, "tasks", ()):
        if any(str(i.id) in ids for i in task.interrupts):
            names.add(task.name)
        if task.state is not None and not isinstance(task.state, dict):
            names |= {f"{task.name}/{n}" for n in _nodes_waiting_on(task.state, ids)}
    return names


def blocked_outcome(blocked: dict[str, Any], run_id: str, thread_id: str) -> RunOutcome:
    """A run a deny stopped, with an error naming the point and the reason."""
    detail = blocked.get("message") or blocked.get("reason") or "denied"
    return RunOutcome(
        run_id=run_id,
        thread_id=thread_id,
        status=RunStatus.BLOCKED,
        error=f"blocked at {blocked.get('point')}: {detail}"[:1000],
    )


def outcome_of(result: Any, run_id: str, thread_id: str) -> RunOutcome:
    """A run's outcome from what the invocation returned: the interrupts it stopped on (each
    naming its approval request) or the final answer."""
    values = result if isinstance(result, dict) else {}
    waiting = [
        (request_id, str(intr.id))
        for intr in values.get(INTERRUPT_CHANNEL) or []
        if (request_id := request_of(intr)) is not None
    ]
    if waiting or values.get(INTERRUPT_CHANNEL):
        return RunOutcome(
            run_id=run_id,
            thread_id=thread_id,
            status=RunStatus.WAITING,
            waiting_on=tuple(waiting),
        )
    # ``approvals_blocked``: the key ApprovalMiddleware adds to a create_agent agent's state.
    blocked = values.get("blocked") or values.get("approvals_blocked")
    if isinstance(blocked, dict):
        return blocked_outcome(blocked, run_id, thread_id)
    messages = values.get("messages") or []
    content = messages[-1].content if messages else None
    if values.get("structured_response") is not None:
        # A create_agent response_format answer: the answer itself, not the tool message
        # that confirmed it to the model.
        content = StructuredAnswer(answer=values["structured_response"], call_id=None).text
    return RunOutcome(
        run_id=run_id,
        thread_id=thread_id,
        status=RunStatus.COMPLETED,
        answer=content if isinstance(content, str) else None,
    )


async def complete_job(claimed: ClaimedJob, outcome: RunOutcome) -> None:
    """Close a resume job with what its run came to (failed when the run failed, done
    otherwise); the same statement settles the run."""
    await claimed.complete(
        JobStatus.FAILED if outcome.status is RunStatus.FAILED else JobStatus.DONE,
        outcome.error,
        outcome.settlement,
    )
