"""The governed agent loop: a model node and one governed tool task per proposed call.

Each tool call of a model turn runs as its own task (LangGraph ``Send``), so each can pause
for its own decision and be resumed independently; a decided call runs without touching the
others, and the loop goes back to the model only when every call of the turn has finished.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Protocol, TypedDict

from agent_hooks import Interceptor
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Send

from graphs.deps import GraphDeps
from graphs.interceptors import EscalateSensitiveTools
from graphs.tool_step import ToolStep
from graphs.tools import GovernedTool


class ChatModel(Protocol):
    """Anything that answers a message list with an ``AIMessage`` (tools already bound)."""

    async def ainvoke(self, messages: list[BaseMessage], /) -> BaseMessage: ...


class AgentState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    run_id: str
    started_by: str


class ToolTask(TypedDict):
    call: dict[str, Any]
    run_id: str
    started_by: str


AgentGraph = CompiledStateGraph[AgentState, None, AgentState, AgentState]


def build_agent(
    *,
    name: str,
    model: ChatModel,
    tools: Sequence[GovernedTool],
    deps: GraphDeps,
    interceptors: Sequence[Interceptor] | None = None,
) -> AgentGraph:
    """Compile a governed agent. Without ``interceptors``, every tool marked sensitive escalates."""
    if interceptors is None:
        interceptors = [EscalateSensitiveTools(t.name for t in tools if t.sensitive)]
    step = ToolStep(graph_name=name, tools=tools, interceptors=interceptors, deps=deps)
    deps.catalog.register(name, tools)

    async def agent(state: AgentState) -> dict[str, Any]:
        reply = await model.ainvoke(list(state["messages"]))
        return {"messages": [reply]}

    def route(state: AgentState) -> list[Send] | str:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            return [
                Send(
                    "tools",
                    ToolTask(call=dict(tc), run_id=state["run_id"], started_by=state["started_by"]),
                )
                for tc in last.tool_calls
            ]
        return END

    async def run_tool(task: ToolTask, config: RunnableConfig) -> dict[str, Any]:
        configurable = config.get("configurable", {})
        thread_id = str(configurable["thread_id"])
        # The checkpoint this step runs from: the state version the approver's decision binds.
        state_version = (configurable.get("checkpoint_map") or {}).get("")
        message = await step(
            state_version=state_version,
            call=task["call"],
            run_id=task["run_id"],
            thread_id=thread_id,
            principal=task["started_by"],
        )
        return {"messages": [message]}

    builder = StateGraph(AgentState)
    builder.add_node("agent", agent)
    # A Send task takes a ToolTask, not the graph state; the stubs only know the latter.
    builder.add_node("tools", run_tool)  # type: ignore[arg-type]
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=deps.checkpointer, name=name)
