"""The tool seam of ``ApprovalMiddleware`` (``graphs.langchain.middleware``): every tool call of a
``create_agent`` agent goes through the engine's tool step (``graphs.langchain.tool_step``), which
decides whether and with which arguments the tool, as ``ToolNode`` runs it, is called.

Run by the engine, the decision is read from the database and reaches the model as
``HumanInTheLoopMiddleware`` words it. Invoked by the application itself, the call keeps HITL's
semantics (a resume value is the application's decision) with the engine's guarantees: the
decision recorded and consumed once, the tool run at most once (``graphs.langchain.in_process``).
``ApprovalMiddleware`` inherits the seam, so the hooks are where ``create_agent`` looks for them.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any

from langchain.agents.middleware import human_in_the_loop as _hitl_module
from langchain.agents.middleware.human_in_the_loop import (
    HumanInTheLoopMiddleware,
    _answer_message,
    _decision_schema,
)
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import get_runtime
from langgraph.types import Command
from pydantic import AfterValidator, BaseModel

from approvals.model import DecisionKind, DecisionRecord, Ruling
from approvals.ports import NewRequest
from graphs.hooks import hitl
from graphs.hooks.governance import Governance
from graphs.langchain.host_state import messages_of
from graphs.langchain.in_process import (
    DECIDED_KEY,
    DecidedHere,
    DecisionsOnlyThroughEngine,
    InProcessSlot,
    LocalApprovals,
    acquire,
    engine_run,
    engine_thread,
    graph_config,
    in_process_run,
    run_sync,
    same_result,
    sticky,
    storable_answer,
    sync_handler,
    turn_of,
)
from graphs.langchain.interrupt_on import CallGate, Gate, call_gate
from graphs.langchain.model_seam import ASYNC_ONLY
from graphs.langchain.tool_step import lc_tool_step
from graphs.langchain.tools import args_model_of
from graphs.run.config import RUN_ID_KEY, EngineRun, NotRunByEngine
from graphs.tool_call.step import MAX_EDIT_ROUNDS, control_error
from graphs.tool_call.tools import GOVERNED_KEY, GovernedTool


class ToolSeam(HumanInTheLoopMiddleware[Any, Any, Any]):
    """The tool calls of an ``ApprovalMiddleware`` agent, governed."""

    # Set by ``ApprovalMiddleware.__init__``.
    #: What governs the calls.
    governance: Governance
    #: ``interrupt_on`` as the engine reads it, by tool name.
    _gates: dict[str, Gate]
    #: Only ``interrupt_on`` governs (no policy, no given governance).
    _gates_only: bool
    #: Where an in-process agent's requests and decisions are recorded.
    local: LocalApprovals
    #: ``"accept"``: a resume value is the application's decision; ``"refuse"``: approvers only.
    resume_decisions: str
    #: The graph an in-process agent's runs are recorded under.
    graph_name: str
    _models: dict[int, tuple[BaseTool, type[BaseModel]]]

    def _governed_as_is(self, tool: BaseTool) -> GovernedTool | None:
        """The ``GovernedTool`` a LangChain tool was made from (``GovernedTool.as_tool``): it
        runs as it is, with its own validation, conditions and ``ToolCall``."""
        governed = (tool.metadata or {}).get(GOVERNED_KEY)
        if not isinstance(governed, GovernedTool):
            return None
        if tool.name in self._gates and not governed.sensitive:
            return dataclasses.replace(governed, sensitive=True)
        return governed

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
        config = graph_config()
        return config is not None and engine_run(config) is None

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """The synchronous seam (``invoke``): HITL's outside a graph; an in-process agent's
        step otherwise (the engine runs agents asynchronously)."""
        config = graph_config()
        if config is None:
            return HumanInTheLoopMiddleware.wrap_tool_call(self, request, handler)
        if engine_run(config) is not None:
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
        config = graph_config()
        if config is None:
            return await HumanInTheLoopMiddleware.awrap_tool_call(self, request, handler)
        run = engine_run(config)
        if run is None:
            return await self._in_process(request, handler, config)
        gate = await sticky(self._call_gate(request), run.deps.requests, run.run_id)
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
        if await engine_thread(config):
            # A thread the engine runs, invoked by hand (without the engine's keys): its calls
            # are decided only through the engine, never by a resume value given here.
            raise NotRunByEngine(RUN_ID_KEY)
        call = request.tool_call
        call_id, name = str(call.get("id")), str(call.get("name"))
        messages = messages_of(request.state)
        turn = turn_of(messages, call_id)
        run = in_process_run(
            config, self.local, self.graph_name, turn.id if turn is not None else None
        )
        gate = await sticky(self._call_gate(request), self.local.requests, run.run_id)
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
                gate = await sticky(self._call_gate(request), self.local.requests, run.run_id)
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
                AfterValidator(functools.partial(storable_answer, pending.tool)),
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
        config = graph_config()
        if not self._gates_only or (config is not None and engine_run(config) is not None):
            return False
        if self.interrupt_mode == "batched" and self._reviewer_edit(request) is not None:
            return False
        return not self._gated(request, self._call_gate(request))

    def _given(self, request: ToolCallRequest, call_id: str) -> hitl.Ruled | None:
        """The decision HITL's ``after_model`` took for this call in this turn, if it took one."""
        decided = request.state.get(DECIDED_KEY) if isinstance(request.state, Mapping) else None
        if not isinstance(decided, Mapping):
            return None
        turn = turn_of(messages_of(request.state), call_id)
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
            result = raw if same_result(message, raw) else message
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
