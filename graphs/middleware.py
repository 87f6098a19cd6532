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

The middleware's parts, one concept each: ``interrupt_on`` and the governance assembled from it
(``graphs.interrupt_on``), the state it adds and the runner's input admission in its terms
(``graphs.host_state``), the model seam it inherits (``graphs.model_seam``) and what a tool
answered, to the ledger and to the model (``graphs.lc_tool_answers``). Their public names are
importable from here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain.agents.middleware.types import AgentState, hook_config
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.prebuilt.tool_node import ToolCallRequest, ToolNode
from langgraph.pregel import Pregel
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import BaseModel

from approvals.policy import Policy, check_policies_tool_names
from graphs import interrupt_on as interrupt_on_
from graphs.admission import emit_input, point_slot, register_gate
from graphs.agent import _call_counts, _refusals, _tool_counts
from graphs.governance import Governance, session_of
from graphs.host_state import (
    BLOCKED,
    NEW_INPUT,
    ApprovalState,
    HostInputGate,
    input_fields,
    messages_of,
)
from graphs.interrupt_on import DECISIONS, Gate, InterruptOn
from graphs.lc_tool_answers import (
    ToolReportedError,
    as_model_sees,
    command_result,
    result_of,
    with_message,
)
from graphs.lc_tools import args_model_of, governed_view
from graphs.model_seam import ASYNC_ONLY, ModelSeam
from graphs.run_config import EngineRun
from graphs.tool_step import ToolStep, control_error
from graphs.tools import GOVERNED_KEY, GovernedTool, ToolCall, ToolCatalog

__all__ = [
    "BLOCKED",
    "DECISIONS",
    "NEW_INPUT",
    "ApprovalMiddleware",
    "ApprovalState",
    "Gate",
    "GovernedToolNode",
    "HostInputGate",
    "InterruptOn",
    "ToolReportedError",
    "register_hosts",
]


class ApprovalMiddleware(ModelSeam):
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
        self._gates = interrupt_on_.gates(interrupt_on or {})
        self.governance = interrupt_on_.governance(
            self._gates, description_prefix, policy, governance
        )
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
        raise NotImplementedError(ASYNC_ONLY)

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
        raise NotImplementedError(ASYNC_ONLY)

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
        messages = messages_of(request.state)
        turn = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        counts = _tool_counts(messages)
        if turn is not None and any(str(tc["id"]) == call_id for tc in turn.tool_calls):
            refused = _refusals(messages, turn).get(call_id)
            if refused is not None:
                return control_error(call_id, name, refused)
            counts = _call_counts(counts, turn, call_id)
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
                    return command_result(answer, call_id)
                return result_of(answer)

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
            tool_counts=counts,
        )
        released = as_model_sees(message)
        if commands and released.status != "error" and isinstance(commands[0].update, dict):
            # A withheld or failed result applies no state update either.
            return with_message(commands[0], released)
        return released


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
            check_policies_tool_names(
                middleware.governance.interceptors, (t.name for t in tools), graph=name
            )
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
                        input_fields=input_fields(graph),
                        takes_context=getattr(graph, "context_schema", None) is not None,
                    ),
                )
            found = True
    return found


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
