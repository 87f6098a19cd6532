"""An ``ApprovalMiddleware`` agent that the application invokes itself, as
``HumanInTheLoopMiddleware``'s users do: ``agent.invoke(...)`` pauses, and
``agent.invoke(Command(resume=...), config)`` carries the human's decision.

The engine's guarantees hold here too. The pending call is recorded (``LocalApprovals``: in
memory by default, or the engine's PostgreSQL tables), the resume value becomes a decision made
by the application's principal, consumed once and bound to the identity of the arguments that
were shown, and the tool runs at most once under the execution ledger, however many resumes
race. A resume that loses the race gets the stored decision, never its own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import threading
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import copy_context
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Annotated, Any, NoReturn, Protocol, TypeVar

from agent_hooks import ApprovalRequest, ApprovalResolution
from langchain.agents.middleware import human_in_the_loop as _hitl_module
from langchain.agents.middleware.human_in_the_loop import (
    _EDITED_TOOL_CALLS_KEY,
    HumanInTheLoopMiddleware,
)
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.messages import ToolCall as LcToolCall
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_config
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from pydantic import AfterValidator

from approvals.decisions import decide
from approvals.errors import ApprovalsError, RequestNotPending
from approvals.json_values import check_inputs
from approvals.memory.requests import MemoryApprovalRequests, MemoryDecisions
from approvals.memory.runs import MemoryToolLedger
from approvals.memory.store import MemoryStore
from approvals.model import DecisionRecord, PendingCall, Vote
from approvals.ports import ApprovalRequests, Decisions, NewRequest, ToolLedger
from graphs.hooks import hitl
from graphs.hooks.approval import StoredDecisionResolver
from graphs.langchain.interrupt_on import CallGate
from graphs.run.config import RUN_ID_KEY, EngineRun
from graphs.tool_call.deps import GraphDeps

T = TypeVar("T")


class RecordRun(Protocol):
    async def __call__(
        self, *, run_id: str, thread_id: str, graph: str, principal: str
    ) -> None: ...


#: The principal an application's own decisions are recorded under, unless it names one.
APP_PRINCIPAL = "app:local"
#: The graph name in-process runs are recorded under, unless the middleware names one.
IN_PROCESS_GRAPH = "in-process"


class DecisionsOnlyThroughEngine(RuntimeError):
    """A resume value reached an agent configured to take decisions only from approvers."""

    def __init__(self) -> None:
        super().__init__(
            "this ApprovalMiddleware takes decisions only from approvers (resume_decisions="
            '"refuse"): run the agent through the approvals engine and decide in the web app, '
            "the API or the CLI"
        )


@dataclass(frozen=True, kw_only=True)
class LocalApprovals:
    """Where an in-process agent keeps its pending calls, decisions and tool executions.

    ``LocalApprovals.in_memory()`` (the default) lives as long as the process;
    ``web.local.connect`` gives the engine's PostgreSQL tables, so in-process calls also show
    in the inbox and the audit log."""

    requests: ApprovalRequests
    decisions: Decisions
    ledger: ToolLedger
    #: Who the application's decisions are recorded as (``app:NAME``).
    principal: str = APP_PRINCIPAL
    request_ttl: timedelta = timedelta(hours=24)
    #: Records a run before its first request (a database's requests reference their run).
    runs: RecordRun | None = None
    #: The event loop the ports belong to (a database pool's), where a synchronous
    #: ``invoke``'s steps run; ``None``: any loop (the in-memory store).
    loop: asyncio.AbstractEventLoop | None = None
    #: Serializes the steps of one thread in this process: a resume racing another one waits
    #: for it and then reads what it recorded, instead of finding its tool mid-run.
    _locks: dict[str, threading.Lock] = field(default_factory=dict, repr=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def in_memory(cls, principal: str = APP_PRINCIPAL) -> LocalApprovals:
        store = MemoryStore()
        return cls(
            requests=MemoryApprovalRequests(store),
            decisions=MemoryDecisions(store),
            ledger=MemoryToolLedger(store),
            principal=principal,
        )

    def lock(self, thread_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(thread_id, threading.Lock())

    async def consume(self, request: PendingCall, decision: hitl.Ruled) -> DecisionRecord | None:
        """Record ``decision`` for ``request`` as the application's, once: a request another
        resume decided first keeps that decision (``None`` here; read it back)."""

        async def as_given(_: PendingCall, args: dict[str, Any]) -> dict[str, Any]:
            # The tool step puts the edited call through pre_tool_call again before it runs.
            return args

        try:
            made = await decide(
                self.requests,
                self.decisions,
                request.id,
                decision.ruling,
                principal=self.principal,
                reason=decision.reason,
                args=decision.args,
                message=decision.message,
                recheck=as_given,
                read=request,
            )
        except RequestNotPending:
            return None
        if isinstance(made, Vote):
            raise RuntimeError(
                f"request {request.id} needs {made.quorum} approvers: an application's "
                "resume cannot decide it; decide it through the engine"
            )
        return made


class DecidedHere(Exception):
    """The in-process pause returned a decision (the resume value); the tool seam records it
    and runs the step again, which then reads the decision it recorded."""

    def __init__(self, request: PendingCall, decision: Any) -> None:
        super().__init__(request.id)
        self.request = request
        self.decision = decision


class InProcessSlot:
    """The approval seam of an in-process run: the stored decision, as in the engine, and
    where there is none yet, the decision the application gave (``given``: HITL's batched
    after_model took it) or the one its resume carries (the pause is HITL's per-call
    interrupt)."""

    def __init__(
        self,
        local: LocalApprovals,
        new: NewRequest,
        given: hitl.Ruled | None,
        interrupt: Callable[..., Any],
        schema: Callable[[PendingCall], Any],
        graph: str = IN_PROCESS_GRAPH,
    ) -> None:
        self._graph = graph
        self._local = local
        self._new = new
        self._given = given
        self._interrupt = interrupt
        self._schema = schema
        self._inner = StoredDecisionResolver(local.requests, new)

    @property
    def request(self) -> PendingCall | None:
        return self._inner.request

    @property
    def decision(self) -> DecisionRecord | None:
        return self._inner.decision

    @property
    def failed(self) -> bool:
        return self._inner.failed

    @property
    def awaiting_human(self) -> bool:
        return self._inner.awaiting_human

    async def resolve(self, request: ApprovalRequest, /) -> ApprovalResolution:
        if self._local.runs is not None:
            await self._local.runs(
                run_id=self._new.run_id,
                thread_id=self._new.thread_id,
                graph=self._graph,
                principal=self._new.requested_by,
            )
        resolution = await self._inner.resolve(request)
        if self._given is not None and self._inner.awaiting_human:
            assert self._inner.request is not None
            await self._local.consume(self._inner.request, self._given)
            self._inner = StoredDecisionResolver(self._local.requests, self._new)
            resolution = await self._inner.resolve(request)
        return resolution

    def suspend(self, context: dict[str, Any]) -> NoReturn:
        """HITL's per-call pause: the interrupt returns the resume value once there is one."""
        request = self._inner.request
        assert request is not None
        answer = self._interrupt(
            hitl.payload(request, "per_call"), response_schema=self._schema(request)
        )
        raise DecidedHere(request, answer)


def in_process_run(
    config: RunnableConfig, local: LocalApprovals, graph: str, turn: str | None
) -> EngineRun:
    """The run an in-process invocation's call belongs to: its thread and the model turn
    that proposed the call (a model may reuse call ids across turns; the ledger keys by run
    and call). No thread: a throwaway run (nothing can resume it)."""
    configurable = config.get("configurable") or {}
    thread = configurable.get("thread_id")
    thread_id = str(thread) if thread not in (None, "") else f"unthreaded-{uuid.uuid4()}"
    # A UUID, as the engine's runs are, named by the thread and the turn (stable on resume).
    run_id = str(uuid.uuid5(_RUNS, f"{thread_id}\x00{turn or uuid.uuid4()}"))
    deps = GraphDeps(
        checkpointer=InMemorySaver(),
        requests=local.requests,
        ledger=local.ledger,
        request_ttl=local.request_ttl,
    )
    return EngineRun(
        run_id=run_id,
        principal=local.principal,
        graph=graph,
        thread_id=thread_id,
        deps=deps,
        state_version=None,
    )


_RUNS = uuid.UUID("5b0f6c1e-3d0a-4f43-9d55-2f3c4a6c1d70")

#: How long a synchronous ``invoke`` waits for the loop its database belongs to to answer.
OWNER_LOOP_TIMEOUT = 5.0

_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="approvals-sync")


def run_sync(
    make: Callable[[], Coroutine[Any, Any, T]], owner: asyncio.AbstractEventLoop | None = None
) -> T:
    """Run a coroutine to completion from synchronous code (``invoke``), in this thread when
    no event loop runs here, else on a worker thread; the caller's context (LangGraph's
    config) goes with it. ``owner``: the loop the coroutine's ports belong to (a database
    pool), where it runs instead, this thread waiting."""
    context = copy_context()
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if owner is not None:
        if owner is running or not owner.is_running():
            raise RuntimeError(
                "this agent's LocalApprovals is on a database opened in an event loop that "
                + ("this thread is running" if owner is running else "is not running")
                + ": invoke the agent with ainvoke/astream in that loop, or call invoke from "
                "another thread while the loop runs"
            )
        # The loop may be this very invocation's caller, blocked in ``invoke``: it would never
        # run what is sent to it. Ask it for a sign of life first.
        alive: concurrent.futures.Future[None] = concurrent.futures.Future()
        owner.call_soon_threadsafe(alive.set_result, None)
        try:
            alive.result(timeout=OWNER_LOOP_TIMEOUT)
        except concurrent.futures.TimeoutError:
            raise RuntimeError(
                "this agent's LocalApprovals is on a database opened in an event loop that does "
                f"not answer within {OWNER_LOOP_TIMEOUT:.0f} s (is invoke called from it?): use "
                "ainvoke/astream in that loop, or call invoke from another thread"
            ) from None
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def start() -> None:
            task = owner.create_task(make(), context=context)
            task.add_done_callback(lambda t: _settle(done, t))

        owner.call_soon_threadsafe(start)
        return done.result()
    if running is None:
        return context.run(asyncio.run, make())
    return _POOL.submit(context.run, asyncio.run, make()).result()


def _settle(done: concurrent.futures.Future[T], task: asyncio.Task[T]) -> None:
    if task.cancelled():
        done.cancel()
    elif (error := task.exception()) is not None:
        done.set_exception(error)
    else:
        done.set_result(task.result())


async def acquire(lock: threading.Lock) -> None:
    """Take ``lock`` without blocking the event loop while another holder finishes. (Polled:
    a thread parked on it would hold one of the executor's workers, which the holder may need
    to run its tool.)"""
    delay = 0.001
    while not lock.acquire(blocking=False):
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)


def sync_handler(
    handler: Callable[[Any], T],
) -> Callable[[Any], Awaitable[T]]:
    """A synchronous tool handler (ToolNode's ``invoke`` path) as the async one the step
    calls."""

    async def call(request: Any) -> T:
        return handler(request)

    return call


# -- telling an in-process call from the engine's, and what a tool seam needs of it -------


def graph_config() -> RunnableConfig | None:
    """The running graph's config; ``None`` when called outside a graph (a unit test calling a
    hook directly), where the middleware is exactly ``HumanInTheLoopMiddleware``."""
    try:
        return get_config()
    except RuntimeError:
        return None


def engine_run(config: RunnableConfig) -> EngineRun | None:
    """The engine's run, when the engine invoked the graph."""
    configurable = config.get("configurable") or {}
    if RUN_ID_KEY not in configurable:
        return None
    return EngineRun.of(config)


def turn_of(messages: Sequence[Any], call_id: str) -> AIMessage | None:
    return next(
        (
            m
            for m in reversed(messages)
            if isinstance(m, AIMessage) and any(str(tc["id"]) == call_id for tc in m.tool_calls)
        ),
        None,
    )


def storable_answer(tool: str, answer: Any) -> Any:
    """A per-call answer the engine can record (checked before LangGraph saves it, so a bad one
    can be answered again): a decision ``hitl.ruled`` reads, with storable values."""
    try:
        ruled = hitl.ruled(answer, tool)
        check_inputs(args=ruled.args, message=ruled.message, reason=ruled.reason)
    except (hitl.InvalidHitlDecision, ApprovalsError) as exc:
        raise ValueError(str(exc)) from None
    return answer


async def engine_thread(config: RunnableConfig) -> bool:
    """Whether the thread's latest checkpoint was written by an engine run (LangGraph keeps the
    run's ``configurable`` strings, the engine's run id among them, in its metadata)."""
    configurable = config.get("configurable") or {}
    saver = configurable.get(CONFIG_KEY_CHECKPOINTER)
    thread = configurable.get("thread_id")
    if not isinstance(saver, BaseCheckpointSaver) or thread in (None, ""):
        return False
    latest = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    try:
        found = await saver.aget_tuple(latest)  # type: ignore[arg-type]
    except NotImplementedError:
        found = saver.get_tuple(latest)  # type: ignore[arg-type]
    return found is not None and RUN_ID_KEY in (found.metadata or {})


async def sticky(gate: CallGate | None, requests: ApprovalRequests, run_id: str) -> CallGate | None:
    """``gate``, asking after all when ``when`` lets a call through that a human was already
    asked about: a predicate that changes its mind on resume never runs a call someone
    rejected (HITL documents that it would); the stored decision is what counts."""
    if gate is None or not gate.skip:
        return gate
    if any(r.call_id == gate.call_id for r in await requests.for_run(run_id)):
        return dataclasses.replace(gate, skip=False)
    return gate


def same_result(step: ToolMessage, raw: ToolMessage) -> bool:
    """Whether the step's message says what the tool's own message said (``post_tool_call``
    left it alone), so the tool's message, with its artifact and metadata, goes back."""
    if step.status != raw.status:
        return False
    if step.content == raw.content:
        return True
    try:
        return bool(json.loads(str(step.content)) == json.loads(str(raw.content)))
    except ValueError:
        return False


#: Where HITL's batched pause leaves the application's decisions for the tool seam:
#: ``{"turn": <AIMessage id>, "calls": {call id: HITL decision}}``.
DECIDED_KEY = "approvals_hitl_decided"


def batched_pause(
    self: HumanInTheLoopMiddleware[Any, Any, Any], state: Any, runtime: Any
) -> dict[str, Any] | None:
    """HITL's batched pause (its request, its descriptions, its ``when``), whose answer is
    checked before LangGraph saves it: a decision per gated call, each one the call allows
    and the engine can record. A bad answer raises and is not kept, so it can be given again.
    Every decision, reject and respond included, then reaches the tool seam, where it is
    recorded and consumed once (a racing resume gets the first recorded decision)."""
    messages = state["messages"]
    last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    gated: list[tuple[LcToolCall, Any]] = []
    for call in last.tool_calls if last is not None else []:
        config = self.interrupt_on.get(call["name"])
        if config is not None and self._should_interrupt(call, config, state, runtime):
            gated.append((call, config))
    if last is None or not gated:
        # An earlier turn's decisions never answer this turn's calls.
        stale: dict[str, Any] = {
            k: {} for k in (_EDITED_TOOL_CALLS_KEY, DECIDED_KEY) if state.get(k)
        }
        return stale or None
    shown = [self._create_action_and_config(c, cfg, state, runtime) for c, cfg in gated]
    request = {
        "action_requests": [action for action, _ in shown],
        "review_configs": [review for _, review in shown],
    }

    def answerable(response: Any) -> Any:
        decisions = response.get("decisions") if isinstance(response, Mapping) else None
        if not isinstance(decisions, list) or len(decisions) != len(gated):
            raise ValueError(f"expected {{'decisions': [...]}} with {len(gated)} decision(s)")
        for (call, config), decision in zip(gated, decisions, strict=True):
            kind = decision.get("type") if isinstance(decision, Mapping) else None
            if kind not in config["allowed_decisions"]:
                raise ValueError(
                    f"decision {kind!r} is not allowed for tool {call['name']!r}: expected "
                    f"one of {config['allowed_decisions']}"
                )
            storable_answer(call["name"], decision)
        return response

    interrupt = getattr(_hitl_module, "interrupt")  # noqa: B009 - as HITL looks it up
    answer = interrupt(
        request, response_schema=Annotated[dict[str, Any], AfterValidator(answerable)]
    )
    decisions = answer["decisions"]
    edits: dict[str, Any] = {}
    decided: dict[str, dict[str, Any]] = {}
    for (call, config), decision in zip(gated, decisions, strict=True):
        self._process_decision(decision, call, config)  # HITL's own check of the decision
        if call.get("id"):
            decided[str(call["id"])] = dict(decision)
            if decision["type"] == "edit":
                edits[str(call["id"])] = decision["edited_action"]
    return {
        "messages": [last],
        _EDITED_TOOL_CALLS_KEY: edits,
        DECIDED_KEY: {"turn": last.id, "calls": decided},
    }
