"""Ordinary langchain ``create_agent`` agents, as a user writes them, governed by changing the
``middleware=[...]`` entry to ``ApprovalMiddleware``: plain ``@tool`` functions (sync and
async, one with injected arguments), a JSON-schema tool, a scripted chat model."""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired

from agent_hooks import Verdict
from langchain.agents import AgentState, create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool, tool
from langgraph.config import get_config
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState, ToolRuntime, create_react_agent, tools_condition
from langgraph.pregel import Pregel
from langgraph.types import Command, interrupt
from pydantic import Field

from graphs import ApprovalMiddleware, GovernedToolNode
from graphs.examples.demo import external_call_latency
from graphs.examples.effects import side_effects
from graphs.examples.scripted import ScriptedToolModel
from graphs.hooks.governance import Governance
from graphs.hosts.registry import ungoverned
from graphs.run.config import RUN_ID_KEY
from graphs.tool_call.call import CheckResult, precondition
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.tools import ToolCall, governed_tool
from tests.integration.governed_graphs import (
    DenyInput,
    DenyOutput,
    EscalateInput,
    EscalateOutput,
    MaskAmountsInOutput,
)


def _since_user(messages: list[BaseMessage]) -> tuple[str, list[ToolMessage]]:
    text, results = "", list[ToolMessage]()
    for m in messages:
        if isinstance(m, HumanMessage):
            text, results = str(m.content), []
        elif isinstance(m, ToolMessage):
            results.append(m)
    return text, results


def refund_script(messages: list[BaseMessage]) -> AIMessage:
    """``refund ORDER AMOUNT [ORDER AMOUNT ...]``: one ``issue_refund`` call per pair, all in
    one turn; then the tools' answers, verbatim."""
    text, results = _since_user(messages)
    if results:
        return AIMessage(content=" | ".join(f"{r.status}: {r.content}" for r in results))
    pairs = re.findall(r"(\d{4}) (\d+(?:\.\d+)?)", text)
    return AIMessage(
        content="",
        tool_calls=[
            {
                "id": f"refund-{order}",
                "name": "issue_refund",
                "args": {"order_id": order, "amount": float(amount)},
            }
            for order, amount in pairs
        ],
    )


def build(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """A refund agent whose tool takes injected arguments (the call id, the state, the
    runtime): none of them is the model's to set, nor the approver's to see."""
    return _refund_agent(deps, ApprovalMiddleware(interrupt_on={"issue_refund": True}))


def _refund_agent(deps: GraphDeps, middleware: ApprovalMiddleware) -> Pregel[Any, Any, Any, Any]:
    return create_agent(
        ScriptedToolModel(script=refund_script),
        tools=[_recording_refund(deps)],
        middleware=[middleware],
        checkpointer=deps.checkpointer,
        name="lc_refund",
    )


def _recording_refund(deps: GraphDeps) -> BaseTool:

    @tool
    async def issue_refund(
        order_id: str,
        amount: float,
        tool_call_id: Annotated[str, InjectedToolCallId],
        state: Annotated[dict[str, Any], InjectedState],
        runtime: ToolRuntime,
    ) -> str:
        """Refund money on an order."""
        run_id = runtime.config["configurable"][RUN_ID_KEY]
        await side_effects(deps).record(
            run_id=run_id,
            call_id=tool_call_id,
            tool="issue_refund",
            args={
                "order_id": order_id,
                "amount": amount,
                "seen": len(state["messages"]),
                "key": runtime.config["metadata"]["idempotency_key"],
            },
        )
        await external_call_latency()
        return f"refunded {amount:.2f} on {order_id}"

    return issue_refund


def _governed(*interceptors: Any) -> Any:
    def factory(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
        governance = Governance(interceptors=interceptors)
        return _refund_agent(
            deps, ApprovalMiddleware(interrupt_on={"issue_refund": True}, governance=governance)
        )

    return factory


class DenyToolCalls:
    """post_model_call: a response proposing a tool call is denied."""

    def intercept(self, ctx: dict[str, Any], /) -> Verdict:
        if ctx.get("interception_point") == "post_model_call" and ctx["response"]["tool_calls"]:
            return Verdict.deny(reason="no_tools_today", message="tools are switched off")
        return Verdict.allow()


deny_input = _governed(DenyInput())
escalate_input = _governed(EscalateInput())
mask_output = _governed(MaskAmountsInOutput())
deny_output = _governed(DenyOutput())
escalate_output = _governed(EscalateOutput())
deny_tool_calls = _governed(DenyToolCalls())


def lookup_script(messages: list[BaseMessage]) -> AIMessage:
    """``look WORD`` calls the sync tool ``lookup``; ``mcp N`` the JSON-schema tool
    ``add_one`` with ``{"n": N}`` (``mcp bad`` with a string)."""
    text, results = _since_user(messages)
    if results:
        return AIMessage(content=" | ".join(f"{r.status}: {r.content}" for r in results))
    if text.startswith("look "):
        call = {"id": "look-1", "name": "lookup", "args": {"word": text[5:]}}
    else:
        raw = text.removeprefix("mcp ")
        n: Any = int(raw) if raw.isdigit() else raw
        call = {"id": "add-1", "name": "add_one", "args": {"n": n}}
    return AIMessage(content="", tool_calls=[call])


def build_tools(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """A sync ``@tool`` (not gated) and a tool whose ``args_schema`` is a JSON-schema document,
    as MCP adapters make them (gated, editable)."""

    @tool
    def lookup(word: str) -> dict[str, Any]:
        """Look a word up."""
        return {"word": word, "length": len(word)}

    async def add_one(**kwargs: Any) -> str:
        await side_effects(deps).record(
            run_id=get_config()["configurable"][RUN_ID_KEY],
            call_id="add-1",
            tool="add_one",
            args=kwargs,
        )
        return json.dumps({"n": kwargs["n"] + 1})

    mcp_like: BaseTool = StructuredTool(
        name="add_one",
        description="Add one to n.",
        args_schema={
            "type": "object",
            "properties": {"n": {"type": "integer", "maximum": 100}},
            "required": ["n"],
            "additionalProperties": False,
        },
        coroutine=add_one,
    )
    return create_agent(
        ScriptedToolModel(script=lookup_script),
        tools=[lookup, mcp_like],
        middleware=[
            ApprovalMiddleware(
                interrupt_on={
                    "add_one": {"allowed_decisions": ["approve", "edit", "reject"]},
                    "lookup": False,
                }
            )
        ],
        checkpointer=deps.checkpointer,
        name="lc_tools",
    )


@tool
async def refund_anything(order_id: str, amount: float) -> str:
    """Refund money on an order (module level: no engine ports in reach)."""
    return f"refunded {amount:.2f} on {order_id}"


def _module_agent(*middleware: Any) -> Pregel[Any, Any, Any, Any]:
    def script(messages: list[BaseMessage]) -> AIMessage:
        reply = refund_script(messages)
        reply.tool_calls = [{**c, "name": "refund_anything"} for c in reply.tool_calls]
        return reply

    return create_agent(
        ScriptedToolModel(script=script), tools=[refund_anything], middleware=list(middleware)
    )


#: As LangGraph users write them: compiled at import, with no checkpointer.
plain_agent = _module_agent()
governed_agent = _module_agent(ApprovalMiddleware(interrupt_on={"refund_anything": True}))
marked_agent = ungoverned(_module_agent())


@tool
async def ask_a_human(question: str) -> str:
    """Ask a human, with LangGraph's own interrupt(): nothing of the engine's."""
    answer: str = interrupt({"question": question})
    return answer


def _asker_script(messages: list[BaseMessage]) -> AIMessage:
    text, results = _since_user(messages)
    if results:
        return AIMessage(content=str(results[-1].content))
    return AIMessage(
        content="", tool_calls=[{"id": "ask-1", "name": "ask_a_human", "args": {"question": text}}]
    )


own_interrupt = create_agent(
    ScriptedToolModel(script=_asker_script),
    tools=[ask_a_human],
    middleware=[ApprovalMiddleware(interrupt_on={})],
)


def nested(deps: GraphDeps) -> StateGraph[Any, Any, Any, Any]:
    """The governed agent as one node of the user's own graph, whose state holds only
    ``messages``; registered as the builder (the engine compiles it with its saver)."""
    return _nested(deps, ApprovalMiddleware(interrupt_on={"issue_refund": True}))


def _nested(deps: GraphDeps, middleware: ApprovalMiddleware) -> StateGraph[Any, Any, Any, Any]:
    agent = create_agent(
        ScriptedToolModel(script=refund_script),
        tools=[_recording_refund(deps)],
        middleware=[middleware],
    )
    parent = StateGraph(MessagesState)
    parent.add_node("assistant", agent)
    parent.add_edge(START, "assistant")
    parent.add_edge("assistant", END)
    return parent


def _nested_governed(*interceptors: Any) -> Any:
    def factory(deps: GraphDeps) -> StateGraph[Any, Any, Any, Any]:
        governance = Governance(interceptors=interceptors)
        return _nested(
            deps, ApprovalMiddleware(interrupt_on={"issue_refund": True}, governance=governance)
        )

    return factory


nested_deny_output = _nested_governed(DenyOutput())
nested_escalate_input = _nested_governed(EscalateInput())
nested_deny_input = _nested_governed(DenyInput())


def tool_node_graph(deps: GraphDeps) -> StateGraph[Any, Any, Any, Any]:
    """A hand-built LangGraph agent: a model node and a ``ToolNode``, the ``ToolNode``
    swapped for ``GovernedToolNode``."""
    model = ScriptedToolModel(script=refund_script)

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_node(
        "tools",
        GovernedToolNode([_recording_refund(deps)], interrupt_on={"issue_refund": True}),
    )
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder


def react_agent(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """``create_react_agent`` given a ``GovernedToolNode`` for its tools."""
    with warnings.catch_warnings():
        # Deprecated in LangGraph 1.x in favour of create_agent, and still widely used.
        warnings.simplefilter("ignore", DeprecationWarning)
        return create_react_agent(
            ScriptedToolModel(script=refund_script),
            tools=GovernedToolNode([_recording_refund(deps)], interrupt_on={"issue_refund": True}),
        )


#: The tools of an MCP server, loaded through langchain-mcp-adapters by the test that registers
#: ``mcp_agent`` (the session they call through lives in that test).
MCP_TOOLS: list[BaseTool] = []


def mcp_agent(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    return create_agent(
        ScriptedToolModel(script=refund_script),
        tools=list(MCP_TOOLS),
        middleware=[ApprovalMiddleware(interrupt_on={"issue_refund": True})],
    )


class ShopState(AgentState[Any]):
    customer_id: str


def shop_agent(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """An agent with its own ``state_schema``: a run's input sets ``customer_id``, which the
    tool reads from the state (injected: the model never sets it)."""

    @tool
    async def issue_refund(
        order_id: str,
        amount: float,
        customer_id: Annotated[str, InjectedState("customer_id")],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ) -> str:
        """Refund money on an order."""
        await side_effects(deps).record(
            run_id=get_config()["configurable"][RUN_ID_KEY],
            call_id=tool_call_id,
            tool="issue_refund",
            args={"order_id": order_id, "amount": amount, "customer_id": customer_id},
        )
        return f"refunded {amount:.2f} on {order_id} to {customer_id}"

    return create_agent(
        ScriptedToolModel(script=refund_script),
        tools=[issue_refund],
        state_schema=ShopState,
        middleware=[ApprovalMiddleware(interrupt_on={"issue_refund": True})],
    )


class NotedState(AgentState[Any]):
    note: NotRequired[str]


def command_agent(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """A tool that returns a ``Command``: its result message and a state update."""

    @tool
    async def issue_refund(
        order_id: str, amount: float, tool_call_id: Annotated[str, InjectedToolCallId]
    ) -> Command[Any]:
        """Refund money on an order."""
        await side_effects(deps).record(
            run_id=get_config()["configurable"][RUN_ID_KEY],
            call_id=tool_call_id,
            tool="issue_refund",
            args={"order_id": order_id, "amount": amount},
        )
        done = f"refunded {amount:.2f} on {order_id}"
        return Command(
            update={
                "messages": [ToolMessage(content=done, tool_call_id=tool_call_id)],
                "note": f"refund on {order_id}",
            }
        )

    return create_agent(
        ScriptedToolModel(script=refund_script),
        tools=[issue_refund],
        state_schema=NotedState,
        middleware=[ApprovalMiddleware(interrupt_on={"issue_refund": True})],
    )


def described(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """``interrupt_on`` with ``allowed_decisions`` (no edit) and a description, as
    ``HumanInTheLoopMiddleware`` takes it."""
    gate = {"allowed_decisions": ["approve", "reject"], "description": "Check the amount first"}
    return _refund_agent(
        deps, ApprovalMiddleware(interrupt_on={"issue_refund": gate}, interrupt_mode="per_call")
    )


@dataclass
class ShopContext:
    customer_id: str


def context_agent(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """An agent with a ``context_schema``; its tool reads the run's context and a
    ``configurable`` value the caller set."""

    @tool
    async def issue_refund(order_id: str, amount: float, runtime: ToolRuntime[ShopContext]) -> str:
        """Refund money on an order."""
        context = runtime.context
        assert isinstance(context, ShopContext)
        region = runtime.config["configurable"]["region"]
        await side_effects(deps).record(
            run_id=runtime.config["configurable"][RUN_ID_KEY],
            call_id=str(runtime.tool_call_id),
            tool="issue_refund",
            args={"order_id": order_id, "customer": context.customer_id, "region": region},
        )
        return f"refunded {amount:.2f} on {order_id} for {context.customer_id} in {region}"

    return create_agent(
        ScriptedToolModel(script=refund_script),
        tools=[issue_refund],
        context_schema=ShopContext,
        middleware=[ApprovalMiddleware(interrupt_on={"issue_refund": True})],
    )


@precondition()
async def at_most_100(args: dict[str, Any], call: ToolCall) -> CheckResult:
    """Refunds above 100 are not for this agent."""
    return args["amount"] <= 100 or f"{args['amount']:.2f} is more than 100"


def governed_tools_agent(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """Governed tools (their conditions, sensitivity and ToolCall) given to create_agent."""

    @governed_tool(sensitive=True, preconditions=[at_most_100])
    async def issue_refund(
        call: ToolCall, order_id: str = Field(pattern=r"^\d{4}$"), amount: float = Field(gt=0)
    ) -> dict[str, Any]:
        """Refund money on an order."""
        await side_effects(deps).record(
            run_id=call.run_id,
            call_id=call.call_id,
            tool="issue_refund",
            args={"order_id": order_id, "amount": amount, "key": call.idempotency_key},
        )
        return {"refunded": amount, "order_id": order_id}

    return create_agent(
        ScriptedToolModel(script=refund_script),
        tools=[issue_refund.as_tool()],
        middleware=[ApprovalMiddleware()],
    )


def tool_node_escalate_input(deps: GraphDeps) -> StateGraph[Any, Any, Any, Any]:
    """A hand-built agent governed only by its ``GovernedToolNode``, whose policy sends some
    inputs to a human: no node of it can pause for one, so the runner holds the input."""
    model = ScriptedToolModel(script=refund_script)

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_node(
        "tools",
        GovernedToolNode(
            [_recording_refund(deps)],
            interrupt_on={"issue_refund": True},
            governance=Governance(interceptors=(EscalateInput(),)),
        ),
    )
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder
