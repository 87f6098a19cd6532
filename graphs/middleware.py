"""``ApprovalMiddleware``: the engine's durable approval for langchain's ``create_agent``.

A drop-in for langchain's ``HumanInTheLoopMiddleware``: the same ``interrupt_on`` mapping says
which tools wait for a human, and ``policy=`` / ``governance=`` add what ``build_agent`` takes.
Where ``HumanInTheLoopMiddleware`` pauses with the question and takes the answer from the
resume value, every tool call here goes through the engine's tool step (``graphs.tool_step``):
validated against what the model may set, ``pre_tool_call`` emitted, the pending request
written before the pause, the decision read from the database (never from the resume value)
and consumed once, the tool run at most once by the execution ledger, ``post_tool_call`` on
its result.

Which run a call belongs to, who started it and where the engine's ports are come from the
run's config (``configurable``), as the engine's runner sets it, never from the agent's state:
the agent keeps its own state schema.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, cast

from agent_hooks import Decision, InterceptionBlocked, Interceptor, Verdict
from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelCallResult,
    ModelRequest,
    ModelResponse,
    hook_config,
)
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.constants import TAG_NOSTREAM
from langgraph.prebuilt.tool_node import ToolCallRequest, ToolNode
from langgraph.pregel import Pregel
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import BaseModel

from approvals.model import DECISION_TYPES, DEFAULT_DECISIONS
from approvals.policy import Policy, load_policy
from graphs.admission import (
    Admission,
    InputGate,
    blocked_reason,
    emit_input,
    point_slot,
    register_gate,
)
from graphs.agent import _refusals, _tool_counts, from_wire, to_wire
from graphs.governance import Governance, Session, SessionHolder, session_of
from graphs.lc_tools import args_model_of, governed_view
from graphs.run_config import EngineRun
from graphs.structured import StructuredAnswer, StructuredAnswerRefused
from graphs.tool_step import ToolStep, control_error
from graphs.tools import GOVERNED_KEY, GovernedTool, ToolCall, ToolCatalog

DECISIONS = frozenset({"approve", "edit", "reject", "respond"})


@dataclass(frozen=True, kw_only=True, slots=True)
class Gate:
    """One ``interrupt_on`` entry: the call waits for a human."""

    allow_edit: bool
    description: str | None
    #: The decisions the approver may make, in the HumanInTheLoopMiddleware vocabulary.
    allowed_decisions: tuple[str, ...] = DEFAULT_DECISIONS


def _gates(interrupt_on: Mapping[str, Any]) -> dict[str, Gate]:
    """``interrupt_on`` read the way ``HumanInTheLoopMiddleware`` reads it; what this engine
    cannot honour is refused here, when the agent is built, never after an approval."""
    gates: dict[str, Gate] = {}
    for name, entry in interrupt_on.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"interrupt_on: a tool name must be a non-empty string, not {name!r}")
        if entry is False:
            continue
        if entry is True:
            # Every decision, as HumanInTheLoopMiddleware reads True (respond included).
            gates[name] = Gate(allow_edit=True, description=None, allowed_decisions=DECISION_TYPES)
            continue
        if not isinstance(entry, Mapping):
            raise TypeError(
                f"interrupt_on[{name!r}] must be True, False or a mapping with "
                f"allowed_decisions, not {type(entry).__name__}"
            )
        unknown = set(entry) - {"allowed_decisions", "description", "args_schema"}
        if unknown:
            # ``when`` would make the question depend on a predicate re-run on resume: a call
            # could run unapproved because the predicate changed its mind. Policies say when.
            raise ValueError(
                f"interrupt_on[{name!r}]: {', '.join(sorted(unknown))} is not supported by "
                "ApprovalMiddleware; say when a call needs a human in a policy (policy=...)"
            )
        allowed = entry.get("allowed_decisions")
        if not isinstance(allowed, list | tuple) or not allowed or not set(allowed) <= DECISIONS:
            raise ValueError(
                f"interrupt_on[{name!r}].allowed_decisions must be a non-empty list of "
                f"{', '.join(sorted(DECISIONS))}"
            )
        description = entry.get("description")
        if description is not None and not isinstance(description, str):
            raise TypeError(
                f"interrupt_on[{name!r}].description must be a string here (a description "
                "computed from the state would change what an approver was shown on resume)"
            )
        gates[name] = Gate(
            allow_edit="edit" in allowed,
            description=description,
            allowed_decisions=tuple(d for d in DECISION_TYPES if d in allowed),
        )
    return gates


class InterruptOn:
    """At ``pre_tool_call``, a call of a tool named in ``interrupt_on`` is a liftable deny:
    a human decides it, with the edit permission its ``allowed_decisions`` give."""

    def __init__(
        self, gates: Mapping[str, Gate], prefix: str, *, sensitive_escalates: bool = False
    ) -> None:
        self._gates = dict(gates)
        self._prefix = prefix
        self._sensitive_escalates = sensitive_escalates

    def intercept(self, context: dict[str, Any], /) -> Verdict:
        if context.get("interception_point") != "pre_tool_call":
            return Verdict.allow()
        name = context.get("tool_call", {}).get("name")
        gate = self._gates.get(name) if isinstance(name, str) else None
        if gate is None and self._sensitive_escalates and _marked_sensitive(context):
            # A governed tool marked sensitive, with no policy to decide: as build_agent does.
            gate = Gate(allow_edit=True, description=None)
        if gate is None:
            return Verdict.allow()
        return Verdict(
            decision=Decision.DENY,
            reason="interrupt_on",
            message=gate.description or f"{self._prefix}: {name}",
            approval={
                "allow_edit": gate.allow_edit,
                "allowed_decisions": list(gate.allowed_decisions),
            },
        )


def _marked_sensitive(context: dict[str, Any]) -> bool:
    extensions = (context.get("extensions") or {}).get("approvals") or {}
    tool = extensions.get("tool") if isinstance(extensions, dict) else None
    return isinstance(tool, dict) and tool.get("sensitive") is True


def _governance(
    gates: Mapping[str, Gate],
    prefix: str,
    policy: str | Path | Policy | None,
    governance: Governance | None,
) -> Governance:
    """``interrupt_on`` first, then the policy, then the given governance's interceptors."""
    interceptors: list[Interceptor] = []
    names: list[str] = []
    alone = policy is None and governance is None
    if gates or alone:
        # Also alone, with no tool named: an emitter with no interceptor denies everything.
        interceptors.append(InterruptOn(gates, prefix, sensitive_escalates=alone))
        names.append("interrupt_on")
    if policy is not None:
        loaded = load_policy(policy) if isinstance(policy, str | Path) else policy
        if not isinstance(loaded, Policy):
            raise TypeError(
                f"policy must be a path or a loaded Policy, not {type(policy).__name__}"
            )
        interceptors.append(loaded)
        names.append(f"policy:{Path(policy).stem}" if isinstance(policy, str | Path) else "policy")
    if governance is None:
        return Governance(interceptors=tuple(interceptors), names=tuple(names))
    if governance.emitter is not None and interceptors:
        raise ValueError(
            "governance builds its own emitter: give interrupt_on and policy to it, not here"
        )
    for i, interceptor in enumerate(governance.interceptors):
        names.append(
            governance.names[i]
            if i < len(governance.names)
            else f"{type(interceptor).__name__}#{i}"
        )
    return dataclasses.replace(
        governance,
        interceptors=(*interceptors, *governance.interceptors),
        names=tuple(names),
    )


class ToolReportedError(RuntimeError):
    """The tool answered with an error result: recorded as a failed execution."""


def _result_of(answer: ToolMessage | Command[Any]) -> Any:
    """What the ledger records for one execution, and ``post_tool_call`` evaluates: the tool
    message's content, or the object or array it is the JSON text of (LangChain turns a tool's
    dict into that text; a policy must see the dict, as a ``build_agent`` tool's)."""
    if isinstance(answer, Command):
        raise TypeError("the tool returned a Command, which ApprovalMiddleware cannot record yet")
    if answer.status == "error":
        raise ToolReportedError(str(answer.content)[:500])
    content = answer.content
    if isinstance(content, str):
        try:
            value = json.loads(content)
        except ValueError:
            return content
        if isinstance(value, dict | list):
            return value
    return content


def _command_result(command: Command[Any], call_id: str) -> Any:
    """What the ledger records for a tool that returned a ``Command``: the content of its
    result message for this call (or that the command was applied)."""
    update = command.update
    if isinstance(update, dict):
        for m in update.get("messages") or []:
            if isinstance(m, ToolMessage) and m.tool_call_id == call_id:
                if m.status == "error":
                    raise ToolReportedError(str(m.content)[:500])
                return _result_of(m)
    return {"command": "applied"}


def _with_message(command: Command[Any], message: ToolMessage) -> Command[Any]:
    """``command`` with its result message for the call replaced by ``message`` (the result
    as ``post_tool_call`` released it), or ``message`` added when it carried none."""
    update = command.update if isinstance(command.update, dict) else {}
    kept = [
        m
        for m in update.get("messages") or []
        if not (isinstance(m, ToolMessage) and m.tool_call_id == message.tool_call_id)
    ]
    return dataclasses.replace(command, update={**update, "messages": [*kept, message]})


def _as_model_sees(message: ToolMessage) -> ToolMessage:
    """The step's message with a text or content-block result given back as the tool gave it,
    not as the JSON text the ledger's record is replayed as (objects stay JSON text, as
    LangChain gives them)."""
    if message.status == "error":
        return message
    try:
        value = json.loads(str(message.content))
    except ValueError:
        return message
    if isinstance(value, str) or (
        isinstance(value, list)
        and all(isinstance(v, str) or (isinstance(v, dict) and "type" in v) for v in value)
    ):
        # Text, or content blocks (what an MCP tool answers with): given back as they were.
        return message.model_copy(update={"content": value})
    return message


#: The agent state keys the middleware adds: what must survive a pause (an input waiting for a
#: human) and why a run was stopped. The run's identity is never here (see ``EngineRun``).
NEW_INPUT = "approvals_new_input"
BLOCKED = "approvals_blocked"


class ApprovalState(AgentState[Any]):
    #: The user message is still to be governed by ``input`` (it waits for a human: only a
    #: graph node can pause); set by the runner's admission.
    approvals_new_input: NotRequired[bool]
    #: Why the run stopped, when a policy denied its input, a model call or its answer.
    approvals_blocked: NotRequired[dict[str, Any] | None]


@dataclass(frozen=True, kw_only=True, slots=True)
class HostInputGate(InputGate):
    """The runner's input admission for a ``create_agent`` host: the same emissions as for a
    ``build_agent`` graph, handed to the agent in its own state's terms."""

    #: The agent is a node of another graph, whose state cannot carry an input waiting for a
    #: human to the agent: such an input stops the run instead of reaching the agent unread.
    nested: bool = False

    async def admit(
        self, holder: SessionHolder, *, run_id: str, principal: str, message: str
    ) -> Admission:
        admission = await InputGate.admit(
            self, holder, run_id=run_id, principal=principal, message=message
        )
        if admission.state is None:
            return admission
        state = admission.state
        # A nested agent's (or a tool node's) graph cannot pause for its input: the runner
        # holds the message until a human decides it (graphs.admission).
        held = self.nested and bool(state.get("new_input"))
        return dataclasses.replace(
            admission,
            state=self.state_for(state["messages"], new_input=bool(state.get("new_input"))),
            held=held,
        )

    def state_for(self, messages: list[Any], *, new_input: bool = False) -> dict[str, Any]:
        """The agent's input state for an admitted message, in its own state's terms."""
        return {"messages": messages, NEW_INPUT: new_input and not self.nested, BLOCKED: None}


class ApprovalMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Durable human approval for ``create_agent``: ``middleware=[ApprovalMiddleware(
    interrupt_on={"issue_refund": True})]`` where ``HumanInTheLoopMiddleware`` stood.

    ``interrupt_on`` maps a tool name to ``True`` (a human decides every call, and may edit
    it), ``False`` (no question) or ``{"allowed_decisions": [...], "description": "..."}``
    (``"edit"`` among the decisions lets the approver edit the arguments; the description is
    the reason the approver is shown). ``interrupt_mode`` is accepted as
    ``HumanInTheLoopMiddleware`` takes it; every call is its own request here either way.
    ``policy`` (a policy file or a loaded ``Policy``) and
    ``governance`` add what ``build_agent`` takes; every call of every tool goes through them.
    """

    def __init__(
        self,
        interrupt_on: Mapping[str, bool | Mapping[str, Any]] | None = None,
        *,
        policy: str | Path | Policy | None = None,
        governance: Governance | None = None,
        description_prefix: str = "Tool execution requires approval",
        interrupt_mode: str = "per_call",
    ) -> None:
        super().__init__()
        if interrupt_mode not in ("per_call", "batched"):
            raise ValueError('interrupt_mode must be "per_call" or "batched"')
        # Accepted so that switching from HumanInTheLoopMiddleware is one word: either way,
        # each call here is its own request, decided and resumed on its own.
        self._gates = _gates(interrupt_on or {})
        self.governance = _governance(self._gates, description_prefix, policy, governance)
        self._models: dict[int, tuple[BaseTool, type[BaseModel]]] = {}

    state_schema = ApprovalState

    #: Whether this middleware's ``before_agent`` runs (in a ``create_agent`` agent): a
    #: ``GovernedToolNode``'s does not, so an input waiting for a human stops its run.
    pauses_for_input = True

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
        messages = _messages_of(state)
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
        raise NotImplementedError(_ASYNC_ONLY)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult[Any]:
        raise NotImplementedError(_ASYNC_ONLY)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        """``pre_model_call`` (a transform changes what the model receives), the model,
        ``post_model_call`` (a transform changes the response; a denied one never enters the
        conversation) and, for a final answer, ``output`` (the answer enters the state only
        once ``output`` allowed it, as ``output`` left it). A deny ends the run, blocked."""
        config = get_config()
        run = EngineRun.of(config)
        session = session_of(
            config, self.governance, graph=run.graph, run_id=run.run_id, principal=run.principal
        )
        model = request.model
        model_id = str(
            getattr(model, "model_name", None)
            or getattr(model, "model", None)
            or type(model).__name__
        )
        history: list[BaseMessage] = list(request.messages)
        turn = sum(1 for m in history if isinstance(m, AIMessage))
        wire = [to_wire(m) for m in history]
        here = point_slot(run, "pre_model_call", turn, {"messages": wire[-1:]})
        ctx = session.context("pre_model_call", model_id=model_id, messages=wire)
        try:
            await session.emit(ctx, here)
        except InterceptionBlocked as blocked:
            return _stopped(session, blocked_reason(blocked))
        if ctx["messages"] != wire:
            request = request.override(messages=cast(list[AnyMessage], from_wire(ctx["messages"])))
        # Buffered, as build_agent's model node: the model's answer is not streamed (LangGraph's
        # "messages" mode) as it is generated, only with the model node's update, once
        # post_model_call and output allowed it (a denied answer reaches no one).
        parent = var_child_runnable_config.get() or {}
        token = var_child_runnable_config.set(
            {**parent, "tags": [*(parent.get("tags") or []), TAG_NOSTREAM]}
        )
        try:
            answered = await handler(request)
        finally:
            var_child_runnable_config.reset(token)
        response = (
            answered.model_response if isinstance(answered, ExtendedModelResponse) else answered
        )
        replies = [m for m in response.result if isinstance(m, AIMessage)]
        if len(replies) != 1:
            # Structured output through a tool, or a model answering twice: not governed yet.
            raise TypeError(
                f"the model answered {len(replies)} messages; ApprovalMiddleware governs one"
            )
        reply = replies[0]
        calls = [
            {"id": tc["id"], "name": tc["name"], "args": tc["args"]} for tc in reply.tool_calls
        ]
        shown = {"content": reply.content, "tool_calls": calls}
        here = point_slot(run, "post_model_call", turn, shown)
        ctx = session.context(
            "post_model_call",
            model_id=model_id,
            content=reply.content,
            tool_calls=calls,
            finish_reason="tool_calls" if calls else "stop",
        )
        try:
            await session.emit(ctx, here)
        except InterceptionBlocked as blocked:
            return _stopped(session, blocked_reason(blocked))
        released = ctx["response"]
        if released["content"] != reply.content or released["tool_calls"] != calls:
            reply = AIMessage(
                content=released["content"] if released["content"] is not None else "",
                tool_calls=released["tool_calls"] or [],
                id=reply.id,
            )
        if response.structured_response is not None:
            structured = StructuredAnswer.of(response.structured_response, response.result)
            kept = await _structured_output(
                session, run, turn, structured, response.result, reply, replies[0]
            )
            if isinstance(kept, ExtendedModelResponse) or not isinstance(
                answered, ExtendedModelResponse
            ):
                return kept
            return ExtendedModelResponse(model_response=kept, command=answered.command)
        if not reply.tool_calls:
            here = point_slot(run, "output", turn, {"content": reply.content})
            ctx = session.context("output", content=reply.content)
            try:
                await session.emit(ctx, here)
            except InterceptionBlocked as blocked:
                return _stopped(session, blocked_reason(blocked))
            final = ctx["output"]["content"]
            if final != reply.content:
                reply = AIMessage(content=final if final is not None else "", id=reply.id)
        result = [reply if m is replies[0] else m for m in response.result]
        kept = ModelResponse(result=result, structured_response=response.structured_response)
        if isinstance(answered, ExtendedModelResponse):
            return ExtendedModelResponse(model_response=kept, command=answered.command)
        return kept

    def _args_model(self, tool: BaseTool) -> type[BaseModel]:
        # Keyed by the tool object (kept alive here): a JSON-schema model is built once.
        known = self._models.get(id(tool))
        if known is None or known[0] is not tool:
            known = (tool, args_model_of(tool))
            self._models[id(tool)] = known
        return known[1]

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        raise NotImplementedError(_ASYNC_ONLY)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """The tool seam: the call runs through the engine's tool step, which decides whether
        and with which arguments ``handler`` (the tool, as ``ToolNode`` runs it) is called."""
        config = request.runtime.config
        run = EngineRun.of(config)
        call = dict(request.tool_call)
        call_id, name = str(call.get("id")), str(call.get("name"))
        messages = _messages_of(request.state)
        turn = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        if turn is not None and any(str(tc["id"]) == call_id for tc in turn.tool_calls):
            refused = _refusals(messages, turn).get(call_id)
            if refused is not None:
                return control_error(call_id, name, refused)
        tool = request.tool
        tools = []
        #: A ``Command`` the tool returned in this process (its state update is applied with
        #: the result the step releases).
        commands: list[Command[Any]] = []
        as_is = self._governed_as_is(tool) if tool is not None else None
        if as_is is not None:
            tools.append(as_is)
        elif tool is not None:

            async def execute(args: dict[str, Any], tool_call: ToolCall) -> Any:
                # The idempotency key reaches a tool that takes ``runtime: ToolRuntime`` as
                # ``runtime.config["metadata"]["idempotency_key"]``, to pass to the systems it
                # calls (the same for every attempt at this call, in any process).
                runtime = request.runtime
                metadata = {
                    **(runtime.config.get("metadata") or {}),
                    "idempotency_key": tool_call.idempotency_key,
                }
                keyed = dataclasses.replace(
                    runtime, config={**runtime.config, "metadata": metadata}
                )
                answer = await handler(
                    # (``override`` does not take the runtime; the request is a dataclass.)
                    dataclasses.replace(
                        request, tool_call={**request.tool_call, "args": args}, runtime=keyed
                    )
                )
                if isinstance(answer, Command):
                    commands.append(answer)
                    return _command_result(answer, call_id)
                return _result_of(answer)

            tools.append(
                governed_view(
                    tool,
                    execute,
                    sensitive=name in self._gates,
                    args_model=self._args_model(tool),
                )
            )
        step = ToolStep(graph_name=run.graph, tools=tools, deps=run.deps)
        session = session_of(
            config, self.governance, graph=run.graph, run_id=run.run_id, principal=run.principal
        )
        message = await step(
            session=session,
            call=call,
            run_id=run.run_id,
            thread_id=run.thread_id,
            principal=run.principal,
            state_version=run.state_version,
            tool_counts=_tool_counts(messages),
        )
        released = _as_model_sees(message)
        if commands and released.status != "error" and isinstance(commands[0].update, dict):
            # A withheld or failed result applies no state update either.
            return _with_message(commands[0], released)
        return released


async def _structured_output(
    session: Session,
    run: EngineRun,
    turn: int,
    structured: StructuredAnswer,
    result: list[BaseMessage],
    reply: AIMessage,
    original: AIMessage,
) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
    """A structured answer (``response_format``) through ``output``, as a final text answer
    goes: it enters the state only once ``output`` allowed it, as ``output`` left it
    (``graphs.structured``); a rewrite its own type refuses stops the run."""
    try:
        value = structured.value if reply is original else structured.released(reply)
        answer = structured.answer if reply is original else structured.parsed(value)
        here = point_slot(run, "output", turn, {"content": value})
        ctx = session.context("output", content=value)
        try:
            await session.emit(ctx, here)
        except InterceptionBlocked as blocked:
            return _stopped(session, blocked_reason(blocked))
        final = ctx["output"]["content"]
        if final != value:
            value, answer = final, structured.parsed(final)
    except StructuredAnswerRefused as exc:
        return _stopped(
            session, {"point": "output", "reason": "structured_answer_refused", "message": str(exc)}
        )
    if answer is structured.answer:
        kept = [reply if m is original else m for m in result]
    else:
        kept = structured.rewritten(result, reply, value, answer)
    return ModelResponse(result=kept, structured_response=answer)


def _stopped(session: Session, reason: dict[str, Any]) -> ExtendedModelResponse[Any]:
    """A model call a deny stopped: nothing of it enters the conversation, the agent ends, and
    its state and the run's session say why (what the runner settles the run as ``blocked``
    from, also when the agent is a node of another graph)."""
    session.blocked = reason
    return ExtendedModelResponse(
        model_response=ModelResponse(result=[]),
        command=Command(update={BLOCKED: reason, "jump_to": "end"}),
    )


class GovernedToolNode(ToolNode):
    """A drop-in for LangGraph's ``ToolNode`` (in any ``StateGraph``, or given to
    ``create_react_agent``) whose every call goes through the engine's tool step, as under
    ``ApprovalMiddleware``: ``interrupt_on``, ``policy`` and ``governance`` are the
    middleware's. Only the tool points are governed (a ``ToolNode`` sees no model call)."""

    def __init__(
        self,
        tools: Sequence[BaseTool | Callable[..., Any]],
        *,
        interrupt_on: Mapping[str, bool | Mapping[str, Any]] | None = None,
        policy: str | Path | Policy | None = None,
        governance: Governance | None = None,
        name: str = "tools",
        tags: list[str] | None = None,
        messages_key: str = "messages",
    ) -> None:
        middleware = ApprovalMiddleware(
            interrupt_on=interrupt_on, policy=policy, governance=governance
        )
        super().__init__(
            tools,
            name=name,
            tags=tags,
            messages_key=messages_key,
            wrap_tool_call=middleware.wrap_tool_call,
            awrap_tool_call=middleware.awrap_tool_call,
        )
        middleware.pauses_for_input = False
        self.middleware = middleware


_ASYNC_ONLY = (
    "ApprovalMiddleware is asynchronous: the approvals engine runs the agent with ainvoke/astream"
)


def register_hosts(graph: Pregel[Any, Any, Any, Any], name: str, catalog: ToolCatalog) -> bool:
    """Find the ``ApprovalMiddleware`` agents in ``graph`` (and its subgraphs), register their
    tools and governance under ``name`` (what listings and edit checks read) and the runner's
    input admission for the top-level one; whether there was one."""
    found = False
    graphs = [
        graph,
        *(sub for _, sub in graph.get_subgraphs(recurse=True) if isinstance(sub, Pregel)),
    ]
    for g in graphs:
        for middleware in _middlewares_in(g):
            tools = [
                t
                for node in g.nodes.values()
                if isinstance(node.bound, ToolNode)
                for t in node.bound.tools_by_name.values()
            ]
            catalog.register(name, middleware.catalog_tools(tools), middleware.governance)
            if not found:
                # The first one found (the top-level agent's, if it is one) governs the run's
                # input; a nested one too, since a message reaches no node ungoverned.
                register_gate(
                    graph,
                    HostInputGate(
                        graph=name,
                        governance=middleware.governance,
                        tools=tuple(sorted(t.name for t in tools)),
                        # Only a create_agent agent's before_agent can pause for an input.
                        nested=g is not graph or not middleware.pauses_for_input,
                        input_fields=_input_fields(graph),
                        takes_context=getattr(graph, "context_schema", None) is not None,
                    ),
                )
            found = True
    return found


def _input_fields(graph: Pregel[Any, Any, Any, Any]) -> tuple[str, ...]:
    """The keys of the graph's input a run may set beside its message: the agent's own state
    (a ``state_schema``'s fields), never the engine's."""
    try:
        properties = graph.get_input_jsonschema().get("properties") or {}
    except Exception:  # a schema LangGraph cannot describe: only the message is taken
        return ()
    engine = {"messages", NEW_INPUT, BLOCKED}
    return tuple(sorted(k for k in properties if isinstance(k, str) and k not in engine))


def _middlewares_in(graph: Pregel[Any, Any, Any, Any]) -> list[ApprovalMiddleware]:
    """The ``ApprovalMiddleware`` instances whose ``before_agent`` hook is a node of
    ``graph`` (``create_agent`` adds one per middleware that has the hook), and those of its
    ``GovernedToolNode``s."""
    found: list[ApprovalMiddleware] = []
    for node in graph.nodes.values():
        if isinstance(node.bound, GovernedToolNode) and node.bound.middleware not in found:
            found.append(node.bound.middleware)
        for attr in ("afunc", "func"):
            owner = getattr(getattr(node.bound, attr, None), "__self__", None)
            if isinstance(owner, ApprovalMiddleware) and owner not in found:
                found.append(owner)
    return found


def _messages_of(state: Any) -> list[BaseMessage]:
    messages = state.get("messages") if isinstance(state, Mapping) else None
    if not isinstance(messages, list):
        return []
    return [m for m in messages if isinstance(m, BaseMessage)]
