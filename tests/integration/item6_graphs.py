"""Graphs as a new user wrote them (issue 31, item 6): a hand-built ``StateGraph`` whose tool
returns ``Command(update=...)`` for state keys of its own, behind a ``GovernedToolNode`` (and the
same graph behind a plain ``ToolNode``, to compare with); a ``create_agent`` agent built by an
``async def`` factory, as one that loads its tools with ``await client.get_tools()`` is."""

from __future__ import annotations

import asyncio
import operator
import re
from collections.abc import Mapping
from typing import Annotated, Any, NotRequired, TypedDict

from langchain.agents import AgentState, create_agent
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.pregel import Pregel
from langgraph.types import Command

from graphs import ApprovalMiddleware, GovernedToolNode
from graphs.examples.scripted import ScriptedToolModel
from graphs.hosts.registry import ungoverned
from graphs.tool_call.deps import GraphDeps
from tests.integration.middleware_graphs import _recording_refund, refund_script


class CreditState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    #: Summed across the turn's calls, as a reducer the user wrote sums them.
    credit_total: Annotated[float, operator.add]
    notes: Annotated[list[str], operator.add]


def credit_script(messages: list[BaseMessage]) -> AIMessage:
    """``credit ORDER AMOUNT [ORDER AMOUNT ...]``: one ``add_credit`` call per pair, all in one
    turn; then the tools' answers, verbatim."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        results = [m for m in messages if isinstance(m, ToolMessage)]
        return AIMessage(content=" | ".join(f"{r.status}: {r.content}" for r in results))
    pairs = re.findall(r"(\d{4}) (\d+(?:\.\d+)?)", str(last.content))
    return AIMessage(
        content="",
        tool_calls=[
            {"id": f"credit-{order}", "name": "add_credit", "args": {"order": order, "amount": a}}
            for order, a in ((o, float(x)) for o, x in pairs)
        ],
    )


@tool
def add_credit(
    order: str, amount: float, tool_call_id: Annotated[str, InjectedToolCallId]
) -> Command[Any]:
    """Credit an order's account."""
    return Command(
        update={
            "credit_total": amount,
            "notes": [f"credited {amount:.2f} to {order}"],
            "messages": [
                ToolMessage(
                    content=f"credited {amount:.2f}", tool_call_id=tool_call_id, name="add_credit"
                )
            ],
        }
    )


def _credit_graph(tools: ToolNode) -> StateGraph[Any, Any, Any, Any]:
    model = ScriptedToolModel(script=credit_script)

    async def call_model(state: CreditState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(CreditState)
    builder.add_node("model", call_model)
    builder.add_node("tools", tools)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder


def credit_governed(deps: GraphDeps) -> StateGraph[Any, Any, Any, Any]:
    """The user's graph, its ``ToolNode`` swapped for ``GovernedToolNode``."""
    return _credit_graph(GovernedToolNode([add_credit], interrupt_on={"add_credit": True}))


def credit_plain(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """The same graph with LangGraph's own ``ToolNode``: what the state should come to."""
    return ungoverned(_credit_graph(ToolNode([add_credit])).compile(checkpointer=deps.checkpointer))


async def _load_tools(deps: GraphDeps) -> list[BaseTool]:
    """Tools that take a round trip to load, as ``await client.get_tools()`` does (an MCP
    client asks its servers which tools they have)."""
    await asyncio.sleep(0)  # it suspends, as a round trip would: the factory must be awaited
    return [_recording_refund(deps)]


async def build_async(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """A ``create_agent`` refund agent built by an ``async def`` factory."""
    tools = await _load_tools(deps)
    return create_agent(
        ScriptedToolModel(script=refund_script),
        tools=tools,
        middleware=[ApprovalMiddleware(interrupt_on={"issue_refund": True})],
        checkpointer=deps.checkpointer,
        name="async_refund",
    )


class Customer(TypedDict):
    tier: str


class TierState(TypedDict):
    """A state declared with ``typing.TypedDict`` (not ``typing_extensions``'), an input key
    of the user's own beside the messages, one of them a ``typing.TypedDict`` too."""

    messages: Annotated[list[AnyMessage], add_messages]
    customer_tier: str
    customer: NotRequired[Customer]


def _tier_answer(state: Mapping[str, Any]) -> AIMessage:
    customer = state.get("customer") or {}
    return AIMessage(content=f"tier {state.get('customer_tier')} / {customer.get('tier')}")


def typed_state_graph(deps: GraphDeps) -> StateGraph[Any, Any, Any, Any]:
    """A hand-built graph on ``TierState`` whose model answers with the input keys it got."""

    async def call_model(state: TierState) -> dict[str, Any]:
        return {"messages": [_tier_answer(state)]}

    builder = StateGraph(TierState)
    builder.add_node("model", call_model)
    builder.add_node("tools", GovernedToolNode([add_credit], interrupt_on={"add_credit": True}))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder


class TierAgentState(AgentState[Any]):
    """langchain's agent state (a ``typing_extensions.TypedDict``) with a field declared as a
    ``typing.TypedDict``."""

    customer: NotRequired[Customer]


def typed_state_agent(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """A ``create_agent`` agent whose ``state_schema`` has a ``typing.TypedDict`` field."""
    return create_agent(
        ScriptedToolModel(script=lambda messages: AIMessage(content="noted")),
        tools=[add_credit],
        state_schema=TierAgentState,
        middleware=[ApprovalMiddleware(interrupt_on={"add_credit": True})],
        checkpointer=deps.checkpointer,
    )


class CreditAgentState(AgentState[Any]):
    credit_total: NotRequired[Annotated[float, operator.add]]
    notes: NotRequired[Annotated[list[str], operator.add]]


def credit_agent(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """The credit tool in a ``create_agent`` agent with ``ApprovalMiddleware``."""
    return create_agent(
        ScriptedToolModel(script=credit_script),
        tools=[add_credit],
        state_schema=CreditAgentState,
        middleware=[ApprovalMiddleware(interrupt_on={"add_credit": True})],
        checkpointer=deps.checkpointer,
    )
