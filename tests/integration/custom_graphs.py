"""A graph registered by configuration, as a user's own would be: its model proposes a refund
whose arguments fail the tool's schema."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from graphs.examples.effects import side_effects
from graphs.examples.scripted import ScriptedChatModel
from graphs.hosts.langgraph.agent import AgentGraph, build_agent
from graphs.tool_call.call import CheckResult, postcondition, precondition
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.tools import ToolCall, governed_tool


def script(messages: list[BaseMessage]) -> AIMessage:
    if isinstance(messages[-1], ToolMessage):
        return AIMessage(content=f"tool said: {messages[-1].content}")
    return AIMessage(
        content="",
        tool_calls=[{"id": "bad-1", "name": "pay", "args": {"amount": -1, "extra": True}}],
    )


def build(deps: GraphDeps) -> AgentGraph:
    @governed_tool(sensitive=True)
    async def pay(call: ToolCall, amount: float) -> dict[str, float]:
        """Pay an amount."""
        await side_effects(deps).record(
            run_id=call.run_id, call_id=call.call_id, tool="pay", args={"amount": amount}
        )
        return {"paid": amount}

    return build_agent(name="custom", model=ScriptedChatModel(script), tools=[pay], deps=deps)


def not_a_graph(deps: GraphDeps) -> object:
    return object()


def conditions_script(messages: list[BaseMessage]) -> AIMessage:
    """Proposes one call per line of the user's message: `pay <amount>`."""
    if isinstance(messages[-1], ToolMessage):
        return AIMessage(content=f"tool said: {messages[-1].content}")
    text = str(messages[-1].content)
    return AIMessage(
        content="",
        tool_calls=[
            {"id": f"pay-{i}", "name": "pay", "args": {"amount": float(word)}}
            for i, word in enumerate(text.split()[1:])
        ],
    )


def build_with_conditions(deps: GraphDeps) -> AgentGraph:
    @precondition()
    async def within_budget(args: dict[str, Any], call: ToolCall) -> CheckResult:
        """At most 100 per payment."""
        return bool(args["amount"] <= 100)

    @postcondition()
    async def receipt_issued(args: dict[str, Any], call: ToolCall, result: Any) -> CheckResult:
        """The payment produced a receipt."""
        return "receipt" in result or "no receipt came back"

    @governed_tool(sensitive=True, preconditions=[within_budget], postconditions=[receipt_issued])
    async def pay(call: ToolCall, amount: float) -> dict[str, float]:
        """Pay an amount."""
        await side_effects(deps).record(
            run_id=call.run_id, call_id=call.call_id, tool="pay", args={"amount": amount}
        )
        return {"paid": amount}

    return build_agent(
        name="conditions", model=ScriptedChatModel(conditions_script), tools=[pay], deps=deps
    )
