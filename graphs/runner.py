"""Starting and resuming runs: one step of a thread at a time, under the thread's lock.

A new message is governed (``agent_startup``, ``input``) before the graph is invoked, so that
no checkpoint holds a message ``input`` denied or masked (``graphs.admission``). After every
invocation the runner settles the run from what the graph returned: the interrupts
it stopped on (each names its approval request, whose interrupt id is recorded) or its final
answer. Before resuming, it checks in the checkpoint that the decided call still waits.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.pregel import Pregel
from langgraph.types import Command

from approvals.errors import DatabaseUnavailable, InvalidRunInput, ThreadBusy
from approvals.json_values import check_inputs
from approvals.model import JobStatus, ResumeCheck, ResumeJob, RunStatus
from approvals.ports import ClaimedJob, NewRun, ResumeChecks, Runs, Settlement
from graphs.admission import (
    HELD_INPUT_CALL,
    Admission,
    InputHeld,
    emit_held_input,
    input_gate,
)
from graphs.agent import close_cancelled
from graphs.governance import SessionHolder, record_row
from graphs.registry import GraphRegistry
from graphs.resolver import decided_beforehand
from graphs.run_config import EngineRun, engine_configurable
from graphs.step_events import RunEventSink, StepEvents, StepUpdates
from graphs.streaming import Publish, invoke_streaming
from graphs.structured import StructuredAnswer

if TYPE_CHECKING:
    from graphs.openai_host.runner import OpenAIRunner

log = logging.getLogger("approvals.runner")

MAX_MESSAGE_LENGTH = 20_000


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOutcome:
    run_id: str
    thread_id: str
    status: RunStatus
    error: str | None = None
    answer: str | None = None
    waiting_on: tuple[tuple[str, str], ...] = ()
    records: tuple[dict[str, Any], ...] = ()
    #: The step's node updates its settlement writes (``graphs.step_events``).
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


@dataclass(frozen=True, kw_only=True, slots=True)
class GraphInput:
    """A host graph's run input: the message ``input`` governs, the graph's other input keys,
    and what its invocations get beside the state."""

    message: str
    state: dict[str, Any]
    #: For the graph's ``context_schema``.
    context: dict[str, Any] | None = None
    #: The caller's ``configurable`` values (the engine's own keys cannot be set).
    configurable: dict[str, Any] | None = None

    def kept(self) -> dict[str, Any]:
        """What the run's row keeps besides the message: what a resume passes again."""
        out: dict[str, Any] = {}
        if self.context is not None:
            out["context"] = self.context
        if self.configurable:
            out["configurable"] = self.configurable
        return out


#: ``configurable`` keys a caller cannot set: the thread, LangGraph's and the engine's own.
_RESERVED_PREFIXES = ("__", "approvals_", "checkpoint_")
_RESERVED_KEYS = frozenset({"thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map"})


def parse_graph_input(value: Any, fields: tuple[str, ...], *, takes_context: bool) -> GraphInput:
    """The input of a graph that takes its own input (a ``create_agent`` agent): its new user
    message, as ``{"messages": [{"role": "user", "content": "..."}]}`` (one message: the one
    ``input`` governs) or ``{"message": "..."}``; the graph's other input keys (``fields``),
    passed on as they are; ``context`` (when the graph has a ``context_schema``) and
    ``configurable``, given to each of its invocations. Anything else is refused, naming what
    the graph takes."""
    if not isinstance(value, dict):
        raise InvalidRunInput('input must be a JSON object like {"messages": [...]}')
    context = value.get("context")
    if "context" in value and (not takes_context or not isinstance(context, dict)):
        raise InvalidRunInput(
            '"context" must be an object, for a graph with a context_schema'
            if takes_context
            else "this graph has no context_schema: it takes no context"
        )
    configurable = value.get("configurable")
    if "configurable" in value:
        if not isinstance(configurable, dict):
            raise InvalidRunInput('"configurable" must be an object')
        reserved = sorted(
            k for k in configurable if k in _RESERVED_KEYS or k.startswith(_RESERVED_PREFIXES)
        )
        if reserved:
            raise InvalidRunInput(f"configurable key(s) the engine sets: {', '.join(reserved)}")
    own = ("message", "messages", "context", "configurable")
    rest = {k: v for k, v in value.items() if k not in own}
    unknown = set(rest) - set(fields)
    if unknown:
        extra = ["context"] if takes_context else []
        takes = ", ".join(["message", "messages", *fields, *extra, "configurable"])
        raise InvalidRunInput(
            f"unknown input field(s): {', '.join(sorted(unknown))} (this graph takes {takes})"
        )
    if "messages" in value:
        if "message" in value:
            raise InvalidRunInput('give "message" or "messages", not both')
        messages = value["messages"]
        if not isinstance(messages, list) or len(messages) != 1:
            raise InvalidRunInput('"messages" must be a list holding the one new user message')
        item = messages[0]
        if isinstance(item, dict) and item.get("role", "user") in ("user", "human"):
            if set(item) - {"role", "content", "type"}:
                raise InvalidRunInput("a message has only role and content")
            item = item.get("content")
        if not isinstance(item, str):
            raise InvalidRunInput(
                'the message must be {"role": "user", "content": "..."} or a string'
            )
    else:
        item = value.get("message")
    return GraphInput(
        message=parse_input({"message": item}),
        state=rest,
        context=context,
        configurable=configurable,
    )


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
                    # Its input is held for a human (graphs.admission): it goes first.
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
            run_id=run_id, thread_id=thread_id, graph=graph_name, started_by=principal, input=kept
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
                blocked = _blocked_outcome(admission.blocked or {}, run_id, thread_id)
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
        hosted = self._registry.openai(job.graph)
        if hosted is not None:
            return await self._openai().resume(hosted, claimed, check)
        graph = self._registry.get(job.graph)
        if job.call_id == HELD_INPUT_CALL:
            return await self._release_held(claimed, graph, check)
        config: RunnableConfig = {"configurable": {"thread_id": job.thread_id}}
        payload: Any = await self._resume_payload(graph, config, job, check.interrupt_id)
        if isinstance(payload, _Finished):
            settled = _outcome_of(payload.values, job.run_id, job.thread_id)
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
        from graphs.openai_host.runner import OpenAIRunner

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
            return await self._ended(holder, _blocked_outcome(blocked, keys.run_id, keys.thread_id))
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
                if _request_of(intr) == job.request_id:
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

    async def _invoke(
        self,
        graph: Pregel[Any, Any, Any, Any],
        payload: Any,
        keys: RunKeys,
        holder: SessionHolder,
    ) -> RunOutcome:
        run_id, thread_id = keys.run_id, keys.thread_id
        # The engine's bookkeeping travels in the config, not in the graph's state: a host
        # graph (create_agent with ApprovalMiddleware) keeps its own state schema.
        engine = engine_configurable(
            run_id=run_id, principal=keys.principal, graph=keys.graph, deps=self._registry.deps
        )
        config: RunnableConfig = {
            "configurable": {
                **(keys.configurable or {}),
                "thread_id": thread_id,
                **holder.config(),
                **engine,
            }
        }
        observe = keys.observe
        # The step's node updates are written by its settlement (graphs.step_events).
        updates = StepEvents(run_id, self._events) if self._events is not None else None

        async def publish(node: str, data: dict[str, Any]) -> None:
            if updates is not None:
                updates.add(node, data)
            if observe is not None:
                await observe(node, data)

        try:
            outcome = await self._invoke_in(
                graph, payload, run_id, thread_id, config, keys.context, publish
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
        return await self._ended(holder, outcome)

    async def _ended(self, holder: SessionHolder, outcome: RunOutcome) -> RunOutcome:
        """The outcome with the session's records; ``agent_shutdown`` when the run ended."""
        session = holder.session
        if session is None:
            return outcome
        if outcome.status is RunStatus.COMPLETED and session.blocked is not None:
            # A nested agent stopped by a deny: its parent's state does not say so.
            outcome = _blocked_outcome(session.blocked, outcome.run_id, outcome.thread_id)
        if outcome.status is not RunStatus.WAITING:
            await session.shutdown(_SHUTDOWN_REASONS.get(outcome.status, "error"))
        return dataclasses.replace(outcome, records=tuple(record_row(r) for r in session.records()))

    async def _invoke_in(
        self,
        graph: Pregel[Any, Any, Any, Any],
        payload: Any,
        run_id: str,
        thread_id: str,
        config: RunnableConfig,
        context: dict[str, Any] | None = None,
        publish: Publish | None = None,
    ) -> RunOutcome:
        try:
            # durability="sync": a step's checkpoint is written before the next step starts. With
            # LangGraph's default ("async") a tool step can record a request, or execute, while
            # the checkpoint holding the model's tool calls is still being written; a crash then
            # replays the model, which may propose other calls, and the recorded call is
            # orphaned (or a different call repeats its effect).
            # Streamed, so that each node update is published as it happens (graphs.streaming).
            result = await invoke_streaming(
                graph, payload, config, context=context, publish=publish or _ignore
            )
        except Exception as exc:  # a host failure stops the run, visibly
            if isinstance(exc, DatabaseUnavailable) or self._transient(exc):
                # The database went away mid-step: nothing is lost (the step re-runs from its
                # checkpoint), so leave the run as it is for the job to be retried.
                raise DatabaseUnavailable(f"{type(exc).__name__}: {exc}") from exc
            log.exception("run %s failed", run_id, extra={"run_id": run_id})
            error = f"{type(exc).__name__}: {exc}"[:1000]
            return RunOutcome(
                run_id=run_id, thread_id=thread_id, status=RunStatus.FAILED, error=error
            )
        foreign = await _foreign_interrupts(graph, config, result)
        if foreign is not None:
            log.error("run %s: %s", run_id, foreign, extra={"run_id": run_id})
            # Nothing will ever answer that interrupt: close the steps waiting on the thread
            # (as for a cancelled run) so that it takes new input.
            notice = f"Run {run_id} failed: it stopped on an interrupt() nobody can answer."
            await close_cancelled(graph, {"configurable": {"thread_id": thread_id}}, notice)
            return RunOutcome(
                run_id=run_id, thread_id=thread_id, status=RunStatus.FAILED, error=foreign
            )
        return _outcome_of(result, run_id, thread_id)


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


async def _ignore(node: str, data: dict[str, Any]) -> None:
    return None


@dataclasses.dataclass(frozen=True)
class _Finished:
    """The thread's graph has ended; ``values`` is its final state."""

    values: dict[str, Any]


_SHUTDOWN_REASONS = {
    RunStatus.COMPLETED: "completed",
    # summary.reason is completed | error | cancelled (AGENT-HOOKS-0.1 §4.2): a run a policy
    # stopped ended in error, as far as the contract is concerned.
    RunStatus.BLOCKED: "error",
    RunStatus.FAILED: "error",
}
INTERRUPT_CHANNEL = "__interrupt__"


def _request_of(intr: Any) -> str | None:
    value = getattr(intr, "value", None)
    if isinstance(value, dict) and isinstance(value.get("request_id"), str):
        return str(value["request_id"])
    return None


async def _foreign_interrupts(
    graph: Pregel[Any, Any, Any, Any], config: RunnableConfig, result: Any
) -> str | None:
    """Why the run cannot wait, when it stopped on an ``interrupt()`` the engine did not
    create (a tool's or a node's own, or another middleware's): no approval request names it,
    so nothing could ever decide it and the run would wait forever. The error names the node."""
    values = result if isinstance(result, dict) else {}
    foreign = [i for i in values.get(INTERRUPT_CHANNEL) or [] if _request_of(i) is None]
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


def _blocked_outcome(blocked: dict[str, Any], run_id: str, thread_id: str) -> RunOutcome:
    """A run a deny stopped, with an error naming the point and the reason."""
    detail = blocked.get("message") or blocked.get("reason") or "denied"
    return RunOutcome(
        run_id=run_id,
        thread_id=thread_id,
        status=RunStatus.BLOCKED,
        error=f"blocked at {blocked.get('point')}: {detail}"[:1000],
    )


def _outcome_of(result: Any, run_id: str, thread_id: str) -> RunOutcome:
    """A run's outcome from what the invocation returned: the interrupts it stopped on (each
    naming its approval request) or the final answer."""
    values = result if isinstance(result, dict) else {}
    waiting = [
        (request_id, str(intr.id))
        for intr in values.get(INTERRUPT_CHANNEL) or []
        if (request_id := _request_of(intr)) is not None
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
        return _blocked_outcome(blocked, run_id, thread_id)
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
