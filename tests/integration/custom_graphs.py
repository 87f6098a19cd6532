"""A graph registered by configuration, as a user's own would be: its model proposes a refund
whose arguments fail the tool's schema."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from graphs.agent import AgentGraph, build_agent
from graphs.deps import GraphDeps
from graphs.scripted import ScriptedChatModel
from graphs.tools import ToolCall, governed_tool


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
        await deps.effects.record(
            run_id=call.run_id, call_id=call.call_id, tool="pay", args={"amount": amount}
        )
        return {"paid": amount}

    return build_agent(name="custom", model=ScriptedChatModel(script), tools=[pay], deps=deps)


def not_a_graph(deps: GraphDeps) -> object:
    return object()
