"""One interface for every agent framework the engine hosts: ``AgentHost``.

The runner (``graphs.orchestration.runner``) holds what every run shares: the thread's lock,
the resume queue, and the settlement of a run and of its job. What differs by framework is an
``AgentHost``, one per registered agent: how a new run's input is admitted and its first step
run, how a claimed job's decided call is resumed, and how the steps a cancelled run left
waiting on its thread are closed. Each framework is one package under ``graphs/hosts/``, whose
``host_for`` the registry asks about what an entry built (``graphs.hosts.registry.FRAMEWORKS``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from approvals.model import JobStatus, ResumeCheck, ResumeJob
from approvals.ports import Runs, Settlement
from graphs.hooks.governance import Governance
from graphs.run.outcome import RunOutcome
from graphs.run.step_events import Publish, RunEventSink
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.tools import GovernedTool


@dataclass(frozen=True, kw_only=True, slots=True)
class HostServices:
    """What a host runs a step with: given by the runner on each call."""

    deps: GraphDeps
    runs: Runs
    #: Whether a failure is the database going away (the step is left to be retried), not a
    #: failure of the agent (the run fails, visibly).
    transient: Callable[[BaseException], bool]
    #: Where a step's node updates are recorded as the run's events (none: nowhere).
    events: RunEventSink | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RunStart:
    """A new run as the runner starts it: its ids, who starts it, and its input as given."""

    run_id: str
    thread_id: str
    principal: str
    input: Any
    #: Given each update of the first step as it happens (``approvals runs start --stream``).
    observe: Publish | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class FirstStep:
    """A new run as its host admitted it, before anything is written."""

    #: What the run's row keeps of the input: nothing of a denied one, a masked one masked.
    input: dict[str, Any]
    #: The run's first step, which the runner runs under the thread's lock: it returns when
    #: the run finishes or pauses.
    run: Callable[[], Awaitable[RunOutcome]]


@dataclass(frozen=True, kw_only=True, slots=True)
class JobEnd:
    """How a resume job ends when no step of its run is run: its status, why, and where the
    run stands (``None``: the run's row is left as it is)."""

    status: JobStatus
    error: str | None = None
    settlement: Settlement | None = None


class AgentHost(Protocol):
    """A registered agent, as the runner starts, resumes and closes its runs."""

    @property
    def name(self) -> str:
        """The registry entry's name (the run's graph)."""
        ...

    @property
    def kind(self) -> str:
        """What the entry built, as an error names it (``"a LangGraph graph"``)."""
        ...

    async def start(self, run: RunStart, services: HostServices) -> FirstStep:
        """Read and admit a new run's input (``agent_startup``, ``input``), writing nothing:
        ``InvalidRunInput`` names what is wrong with it."""
        ...

    async def resume(
        self, job: ResumeJob, check: ResumeCheck, services: HostServices
    ) -> RunOutcome | JobEnd:
        """Resume the run of a claimed job with its decided call(s), if they still wait; the
        runner holds the thread's lock, and completes the job with what this returns."""
        ...

    async def waiting(self, thread_id: str) -> bool:
        """Whether steps of the thread's agent wait to be resumed (a host that keeps nothing
        across runs of a thread says ``False``)."""
        ...

    async def close_waiting(self, thread_id: str, notice: str) -> bool:
        """Close the steps a cancelled run left waiting on the thread (each waiting call
        answers ``cancelled``, with ``notice``), nothing run; whether the thread is free."""
        ...

    def tools(self) -> list[GovernedTool]:
        """The governed tools whose calls an approver may edit, with their validation."""
        ...

    def describe_tools(self) -> list[dict[str, Any]]:
        """The agent's tools as ``approvals tools list`` shows them."""
        ...

    def edit_governance(self) -> Governance | None:
        """What an edited call is checked against again (``None``: its calls take no
        edits)."""
        ...


#: A framework's ``host_for(name, target, built, deps)``: what a registry entry (``name =
#: "target"``) built, as that framework's host, or ``None`` when it is not one of its agents.
HostFor = Callable[[str, str, Any, GraphDeps], AgentHost | None]
