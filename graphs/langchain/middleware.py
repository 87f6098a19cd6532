"""``ApprovalMiddleware``: the engine's durable approval for langchain's ``create_agent``.

A drop-in for langchain's ``HumanInTheLoopMiddleware``: the same ``interrupt_on`` mapping says
which tools wait for a human, and ``policy=`` / ``governance=`` add what ``build_agent`` takes.
Where ``HumanInTheLoopMiddleware`` pauses with the question and takes the answer from the
resume value, every tool call here goes through the engine's tool step (``graphs.tool_call.step``):
validated against what the model may set, ``pre_tool_call`` emitted, the pending request
written before the pause, the decision read from the database (never from the resume value)
and consumed once, the tool run at most once by the execution ledger, ``post_tool_call`` on
its result.

Which run a call belongs to, who started it and where the engine's ports are come from the
run's config (``configurable``), as the engine's runner sets it, never from the agent's state:
the agent keeps its own state schema.

The middleware's parts, one concept each: ``interrupt_on`` and the governance assembled from it
(``graphs.langchain.interrupt_on``), the state it adds and the runner's input admission in its terms
(``graphs.langchain.host_state``), the model seam it inherits (``graphs.langchain.model_seam``) and
what a tool answered, to the ledger and to the model (``graphs.langchain.tool_answers``). Their
public names are importable from here.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import human_in_the_loop as _hitl_module
from langchain.agents.middleware.human_in_the_loop import (
    _EDIT_NOTICE,
    HumanInTheLoopMiddleware,
    _answer_message,
    _decision_schema,
    _HumanInTheLoopState,
)
from langchain.agents.middleware.types import AgentState, PrivateStateAttr, hook_config
from langchain_core.messages import HumanMessage, RemoveMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime, get_runtime
from langgraph.types import Command
from pydantic import AfterValidator, BaseModel

from approvals.model import DecisionKind, DecisionRecord, Ruling
from approvals.policy import Policy
from approvals.ports import NewRequest
from graphs.hooks import hitl
from graphs.hooks.governance import Governance, session_of
from graphs.langchain import interrupt_on as interrupt_on_
from graphs.langchain.host_state import (
    BLOCKED,
    NEW_INPUT,
    HostInputGate,
    messages_of,
)
from graphs.langchain.host_state import ApprovalState as _HostState
from graphs.langchain.in_process import (
    DECIDED_KEY,
    IN_PROCESS_GRAPH,
    DecidedHere,
    DecisionsOnlyThroughEngine,
    InProcessSlot,
    LocalApprovals,
    acquire,
    batched_pause,
    in_process_run,
    run_sync,
    sync_handler,
)
from graphs.langchain.in_process import (
    engine_run as _engine_run,
)
from graphs.langchain.in_process import (
    engine_thread as _engine_thread,
)
from graphs.langchain.in_process import (
    graph_config as _graph_config,
)
from graphs.langchain.in_process import (
    same_result as _same_result,
)
from graphs.langchain.in_process import (
    sticky as _sticky,
)
from graphs.langchain.in_process import (
    storable_answer as _storable_answer,
)
from graphs.langchain.in_process import (
    turn_of as _turn_of,
)
from graphs.langchain.interrupt_on import DECISIONS, CallGate, Gate, InterruptOn, call_gate
from graphs.langchain.model_seam import ASYNC_ONLY, ModelSeam
from graphs.langchain.tool_answers import (
    ToolReportedError,
)
from graphs.langchain.tool_step import lc_tool_step
from graphs.langchain.tools import args_model_of, governed_view
from graphs.run.admission import emit_input, point_slot
from graphs.run.config import RUN_ID_KEY, EngineRun, NotRunByEngine
from graphs.tool_call.step import MAX_EDIT_ROUNDS, control_error
from graphs.tool_call.tools import GOVERNED_KEY, GovernedTool, ToolCall

__all__ = [
    "BLOCKED",
    "DECISIONS",
    "NEW_INPUT",
    "ApprovalMiddleware",
    "ApprovalState",
    "DecisionsOnlyThroughEngine",
    "Gate",
    "HostInputGate",
    "InterruptOn",
    "LocalApprovals",
    "ToolReportedError",
]


class ApprovalState(_HostState, _HumanInTheLoopState[Any]):
    """The middleware's state: the runner's admission keys, HumanInTheLoopMiddleware's edits,
    and the decisions an in-process resume gave for the turn's calls."""

    #: ``{"turn": <AIMessage id>, "calls": {call id: HITL decision}}``: what the application's
    #: resume decided in ``after_model`` (batched), which the tool seam records before it runs.
    approvals_hitl_decided: NotRequired[Annotated[dict[str, Any], PrivateStateAttr]]


class ApprovalMiddleware(ModelSeam, HumanInTheLoopMiddleware[Any, Any, Any]):
    """Durable human approval for ``create_agent``: ``middleware=[ApprovalMiddleware(
    interrupt_on={"issue_refund": True})]`` where ``HumanInTheLoopMiddleware`` stood.

    It is a ``HumanInTheLoopMiddleware``: the same ``interrupt_on`` (``True``, ``False`` or
    ``InterruptOnConfig`` with ``allowed_decisions``, ``description`` text or factory and
    ``when``), ``description_prefix``, ``edit_notice`` and ``interrupt_mode``, the same interrupt
    payloads and the same messages. ``policy`` (a policy file or a loaded ``Policy``) and
    ``governance`` add what ``build_agent`` takes; every call of every tool goes through them.

    Run by the engine (``approvals runs start``, ``Runner.start``), a decision comes only from
    an authenticated approver, through the engine. Invoked by the application itself, a
    resume value (``Command(resume=...)``) is taken as the application's decision
    (``resume_decisions="accept"``, HITL's behaviour and the default), recorded in ``local``
    and consumed once; ``resume_decisions="refuse"`` takes decisions only from approvers
    (``local`` then names the engine's database, where they decide).
    """

    def __init__(
        self,
        interrupt_on: Mapping[str, bool | Mapping[str, Any]] | None = None,
        *,
        policy: str | Path | Policy | None = None,
        governance: Governance | None = None,
        description_prefix: str = "Tool execution requires approval",
        edit_notice: str | None = _EDIT_NOTICE,
        interrupt_mode: str = "batched",
        local: LocalApprovals | None = None,
        resume_decisions: str = "accept",
        name: str = IN_PROCESS_GRAPH,
    ) -> None:
        # Ours first: what this engine cannot honour is refused with its reason; then HITL's
        # own reading (and its errors) of the same mapping.
        interrupt_on_.gates(interrupt_on or {})
        HumanInTheLoopMiddleware.__init__(
            self,
            dict(interrupt_on or {}),  # type: ignore[arg-type]
            description_prefix=description_prefix,
            edit_notice=edit_notice,
            interrupt_mode=interrupt_mode,  # type: ignore[arg-type]
        )
        if resume_decisions not in ("accept", "refuse"):
            raise ValueError('resume_decisions must be "accept" or "refuse"')
        self._gates = interrupt_on_.gates(self.interrupt_on)
        self.governance = interrupt_on_.governance(
            self._gates, description_prefix, policy, governance
        )
        #: Only ``interrupt_on`` governs (no policy, no given governance): an ungated call of
        #: an in-process agent runs exactly as ``ToolNode`` runs it.
        self._gates_only = policy is None and governance is None
        self.local = local if local is not None else LocalApprovals.in_memory()
        self.resume_decisions = resume_decisions
        self.graph_name = name
        self._models: dict[int, tuple[BaseTool, type[BaseModel]]] = {}

    state_schema = ApprovalState

    #: Whether this middleware's ``before_agent`` runs (in a ``create_agent`` agent): a
    #: ``GovernedToolNode``'s does not, so an input waiting for a human stops its run.
    pauses_for_input = True

    def _run_of(self, config: RunnableConfig) -> EngineRun | None:
        """The run a model hook belongs to: the engine's, or, for an in-process agent with a
        policy or governance, the thread's own (``None``: nothing to govern there)."""
        run = _engine_run(config)
        if run is not None or self._gates_only:
            return run
        return in_process_run(config, self.local, self.graph_name, "model")

    def catalog_tools(self, tools: Iterable[BaseTool]) -> list[GovernedTool]:
        """``tools`` as listings and edit checks see them (never run from there)."""

        async def not_here(args: dict[str, Any], call: ToolCall) -> Any:
            raise RuntimeError("a listed tool runs only through its agent")

        return [
            self._governed_as_is(t)
            or governed_view(
                t, not_here, sensitive=t.name in self._gates, args_model=self._args_model(t)
            )
            for t in tools
        ]

    def _governed_as_is(self, tool: BaseTool) -> GovernedTool | None:
        """The ``GovernedTool`` a LangChain tool was made from (``GovernedTool.as_tool``): it
        runs as it is, with its own validation, conditions and ``ToolCall``."""
        governed = (tool.metadata or {}).get(GOVERNED_KEY)
        if not isinstance(governed, GovernedTool):
            return None
        if tool.name in self._gates and not governed.sensitive:
            return dataclasses.replace(governed, sensitive=True)
        return governed

    # -- the agent's input ---------------------------------------------------------------

    @hook_config(can_jump_to=["end"])
    async def abefore_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """``input`` for a user message that waits for a human: the runner's admission
        governed every other one (``agent_startup`` and ``input``) before the agent saw it.
        Here the run pauses until the message is decided; a rejected one leaves the
        conversation and ends the run."""
        if not state.get(NEW_INPUT):
            return None
        config = get_config()
        run = EngineRun.of(config)
        session = session_of(
            config, self.governance, graph=run.graph, run_id=run.run_id, principal=run.principal
        )
        messages = messages_of(state)
        done: dict[str, Any] = {NEW_INPUT: False}
        human = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
        if human is None:
            return done
        turn = sum(1 for m in messages if isinstance(m, HumanMessage))
        here = point_slot(run, "input", turn, {"content": human.content})
        content, blocked = await emit_input(session, human.content, here)
        if blocked is not None:
            session.blocked = blocked
            remove = [RemoveMessage(id=human.id)] if human.id else []
            return {**done, BLOCKED: blocked, "messages": remove, "jump_to": "end"}
        if content != human.content:
            return {**done, "messages": [HumanMessage(content=content, id=human.id)]}
        return done

    def before_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        # Only the engine's admission sets NEW_INPUT, and the engine runs agents asynchronously.
        if not state.get(NEW_INPUT):
            return None
        raise NotImplementedError(ASYNC_ONLY)

    # -- HumanInTheLoopMiddleware's pause after the model (batched) -----------------------

    @hook_config(can_jump_to=["end"])
    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """HITL's batched interrupt, for an agent the application invokes itself. Under the
        engine (or with ``resume_decisions="refuse"``) every call pauses in the tool seam
        instead, where the decision is read from the database."""
        config = _graph_config()
        if config is None:
            return HumanInTheLoopMiddleware.after_model(self, state, runtime)
        if state.get(BLOCKED):
            # The model seam stopped the agent (a deny): this hook follows the model node, so
            # the run ends here, as the seam's jump said.
            return {"jump_to": "end"}
        if _engine_run(config) is not None or self.resume_decisions == "refuse":
            return None
        if self.interrupt_mode == "per_call":
            return None  # each call pauses in the tool seam, as HITL's per-call mode does
        return batched_pause(self, state, runtime)

    @hook_config(can_jump_to=["end"])
    async def aafter_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return self.after_model(state, runtime)

    # -- the tool seam --------------------------------------------------------------------

    def _args_model(self, tool: BaseTool) -> type[BaseModel]:
        # Keyed by the tool object (kept alive here): a JSON-schema model is built once.
        known = self._models.get(id(tool))
        if known is None or known[0] is not tool:
            known = (tool, args_model_of(tool))
            self._models[id(tool)] = known
        return known[1]

    def _call_gate(self, request: ToolCallRequest) -> CallGate | None:
        """``when`` and a description factory, evaluated for this call as HITL evaluates
        them (``InterruptOn`` reads the outcome)."""
        call = request.tool_call
        gate = self._gates.get(str(call.get("name")))
        config = self.interrupt_on.get(str(call.get("name")))
        if gate is None or config is None:
            return None
        skip = gate.when is not None and not gate.when(request)
        description = None
        if not skip and callable(gate.description):
            description = gate.description(call, request.state, get_runtime())
        elif not skip and gate.description is None and self._engine_free():
            # HITL's own default text, for an in-process agent (the engine's approvers see
            # the arguments beside the reason, redacted where a policy says so).
            description = self._create_action_and_config(
                call, config, request.state, get_runtime()
            )[0].get("description")
        return CallGate(
            call_id=str(call.get("id")),
            skip=skip,
            description=description,
            when_asked=gate.when is not None,
        )

    def _engine_free(self) -> bool:
        config = _graph_config()
        return config is not None and _engine_run(config) is None

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """The synchronous seam (``invoke``): HITL's outside a graph; an in-process agent's
        step otherwise (the engine runs agents asynchronously)."""
        config = _graph_config()
        if config is None:
            return HumanInTheLoopMiddleware.wrap_tool_call(self, request, handler)
        if _engine_run(config) is not None:
            raise NotImplementedError(ASYNC_ONLY)
        return run_sync(
            lambda: self._in_process(request, sync_handler(handler), config), self.local.loop
        )

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """The tool seam: the call runs through the engine's tool step, which decides whether
        and with which arguments ``handler`` (the tool, as ``ToolNode`` runs it) is called."""
        config = _graph_config()
        if config is None:
            return await HumanInTheLoopMiddleware.awrap_tool_call(self, request, handler)
        run = _engine_run(config)
        if run is None:
            return await self._in_process(request, handler, config)
        gate = await _sticky(self._call_gate(request), run.deps.requests, run.run_id)
        with hitl.interrupt_mode(self.interrupt_mode), call_gate(gate):
            message, _, decision = await self._step(request, handler, run, request.runtime.config)
        # An approver's decision reaches the model as HumanInTheLoopMiddleware words it.
        return self._as_hitl_answers(request, message, None, decision, None)

    async def _in_process(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
        config: RunnableConfig,
    ) -> ToolMessage | Command[Any]:
        """An agent the application invokes itself: HITL's semantics, with the engine's
        guarantees (the decision recorded and consumed once, the tool run at most once)."""
        if await _engine_thread(config):
            # A thread the engine runs, invoked by hand (without the engine's keys): its calls
            # are decided only through the engine, never by a resume value given here.
            raise NotRunByEngine(RUN_ID_KEY)
        call = request.tool_call
        call_id, name = str(call.get("id")), str(call.get("name"))
        messages = messages_of(request.state)
        turn = _turn_of(messages, call_id)
        run = in_process_run(
            config, self.local, self.graph_name, turn.id if turn is not None else None
        )
        gate = await _sticky(self._call_gate(request), self.local.requests, run.run_id)
        gated = self._gated(request, gate)
        if gated and call.get("id") is None:
            raise ValueError(
                f"Tool call `{name}` has no ID, so no decision can be bound to it. Make sure "
                "the chat model returns tool call IDs."
            )
        # Decisions read from the state exist only where HITL's batched after_model took them
        # from the application's resume; under "refuse", or per call, the state holds none.
        from_after_model = self.interrupt_mode == "batched" and self.resume_decisions == "accept"
        executed = self._reviewer_edit(request) if from_after_model else None
        if self._gates_only and not gated and executed is None:
            # Nothing governs this call: it runs as ToolNode runs it.
            return await handler(request)
        given = self._given(request, call_id) if from_after_model else None
        if executed is not None:
            if executed["name"] != name:
                # Redirected to another tool: that call is what the reviewer approved, and it
                # goes through the policy like any call.
                try:
                    request = self._apply_edit(request, executed)
                except ValueError as exc:
                    # Checkpointed already: raising would fail every later invocation too.
                    return control_error(
                        call_id, name, {"code": "edit_refused", "message": str(exc)[:500]}
                    )
                given = hitl.Ruled(ruling=Ruling.APPROVE)
                gate = await _sticky(self._call_gate(request), self.local.requests, run.run_id)
            else:
                given = hitl.ruled({"type": "edit", "edited_action": executed}, name)

        # Looked up in HITL's module at each pause, as HITL's own code does.
        def interrupt(value: Any, **kwargs: Any) -> Any:
            return getattr(_hitl_module, "interrupt")(value, **kwargs)  # noqa: B009

        lock = self.local.lock(run.thread_id)
        await acquire(lock)
        try:
            for _ in range(MAX_EDIT_ROUNDS + 1):
                slots = functools.partial(self._slot, given, interrupt, request.tool)
                deps = dataclasses.replace(run.deps, slots=slots)
                here = dataclasses.replace(run, deps=deps)
                try:
                    with hitl.interrupt_mode("per_call"), call_gate(gate):
                        message, raw, decision = await self._step(request, handler, here, config)
                except DecidedHere as decided:
                    if self.resume_decisions == "refuse":
                        raise DecisionsOnlyThroughEngine() from None
                    await self.local.consume(decided.request, hitl.ruled(decided.decision, name))
                    given = None
                    continue
                return self._as_hitl_answers(request, message, raw, decision, executed)
        finally:
            lock.release()
        raise RuntimeError(f"{name}: more than {MAX_EDIT_ROUNDS} decisions for one call")

    def _slot(
        self,
        given: hitl.Ruled | None,
        interrupt: Callable[..., Any],
        tool: BaseTool | None,
        new: NewRequest,
    ) -> InProcessSlot:
        return InProcessSlot(
            self.local,
            new,
            given,
            interrupt,
            lambda pending: Annotated[
                _decision_schema(
                    list(pending.offered_decisions),  # type: ignore[arg-type]
                    pending.tool,
                    tool,
                ),
                AfterValidator(functools.partial(_storable_answer, pending.tool)),
            ],
            self.graph_name,
        )

    def _gated(self, request: ToolCallRequest, gate: CallGate | None) -> bool:
        """Whether ``interrupt_on`` (or a governed tool's sensitivity) asks about the call."""
        if gate is not None and not gate.skip:
            return True
        governed = self._governed_as_is(request.tool) if request.tool is not None else None
        return governed is not None and governed.sensitive

    def runs_ungoverned(self, request: ToolCallRequest) -> bool:
        """Whether the call runs exactly as ``ToolNode`` runs it: an agent the application
        invokes itself, governed only by ``interrupt_on``, which does not ask about it."""
        config = _graph_config()
        if not self._gates_only or (config is not None and _engine_run(config) is not None):
            return False
        if self.interrupt_mode == "batched" and self._reviewer_edit(request) is not None:
            return False
        return not self._gated(request, self._call_gate(request))

    def _given(self, request: ToolCallRequest, call_id: str) -> hitl.Ruled | None:
        """The decision HITL's ``after_model`` took for this call in this turn, if it took one."""
        decided = request.state.get(DECIDED_KEY) if isinstance(request.state, Mapping) else None
        if not isinstance(decided, Mapping):
            return None
        turn = _turn_of(messages_of(request.state), call_id)
        if turn is None or decided.get("turn") != turn.id:
            return None
        decision = (decided.get("calls") or {}).get(call_id)
        if decision is None:
            return None
        return hitl.ruled(decision, str(request.tool_call.get("name")))

    def _as_hitl_answers(
        self,
        request: ToolCallRequest,
        message: ToolMessage | Command[Any],
        raw: ToolMessage | Command[Any] | None,
        decision: DecisionRecord | None,
        executed: Any,
    ) -> ToolMessage | Command[Any]:
        """The step's outcome as HITL gives it: the stored decision's message for a rejected
        or answered call, the tool's own message when it ran, with the edit notice."""
        call = request.tool_call
        name = str(call.get("name"))
        if decision is not None and decision.principal.startswith("system:"):
            # Not a person's decision (an expiry): the engine's own error says what happened.
            return message
        if decision is not None and decision.kind in (DecisionKind.REJECT, DecisionKind.RESPOND):
            return _answer_message(call, hitl.as_hitl(decision, name))  # type: ignore[arg-type]
        result: ToolMessage | Command[Any] = message
        if isinstance(raw, ToolMessage) and isinstance(message, ToolMessage):
            result = raw if _same_result(message, raw) else message
        if decision is not None and decision.kind is DecisionKind.EDIT and decision.args:
            executed = {"name": name, "args": decision.args}
        return self._annotate_edited_result(result, request, executed)

    async def _step(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
        run: EngineRun,
        config: RunnableConfig,
    ) -> tuple[ToolMessage | Command[Any], ToolMessage | Command[Any] | None, Any]:
        """One call through the engine's tool step (``graphs.langchain.tool_step``)."""
        tool = request.tool
        return await lc_tool_step(
            request,
            handler,
            run,
            config,
            governance=self.governance,
            governed=self._governed_as_is(tool) if tool is not None else None,
            args_model=self._args_model,
            sensitive=str(request.tool_call.get("name")) in self._gates,
        )
