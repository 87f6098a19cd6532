"""The agent of ``bench/approval_cycle.py``, the same for every variant: one model turn proposing
one refund, the tool call (one side-effect row), one final model turn; governed (``build``,
registered as ``bench``) and bare (``build_bare``)."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt
from pydantic import Field

from graphs.examples.demo import current_turn, result_of
from graphs.examples.effects import side_effects
from graphs.examples.scripted import ScriptedChatModel
from graphs.hosts.langgraph.agent import AgentGraph, AgentState, ToolTask, build_agent
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.tools import GovernedTool, ToolCall, governed_tool

GRAPH = "bench"
GRAPH_ENTRY = "bench.cycle_agent:build"
MESSAGE = "Please refund order 1001"
REQUESTER = "bench-requester"
APPROVER = "bench-approver"


# --------------------------------------------------------------------------------------


def bench_script(messages: list[BaseMessage]) -> AIMessage:
    text, results = current_turn(messages)
    if not results:
        match = re.search(r"\b\d{4}\b", text)
        order_id = match.group(0) if match else "1001"
        return AIMessage(
            content="",
            tool_calls=[
                {
                    "id": f"refund-{order_id}",
                    "name": "issue_refund",
                    "args": {"order_id": order_id, "amount": 25.0, "reason": "customer request"},
                }
            ],
        )
    outcome = result_of(results[-1])
    if "error" in outcome:
        return AIMessage(content=f"Refund not issued: {outcome['error']}")
    return AIMessage(content=f"Refunded {outcome['amount']:.2f} on order {outcome['order_id']}.")


async def refund(
    effects: Any, *, run_id: str, call_id: str, key: str, order_id: str, amount: float, reason: str
) -> dict[str, object]:
    """The tool body both variants run: one side-effect row, like the example refund tool."""
    await effects.record(
        run_id=run_id,
        call_id=call_id,
        tool="issue_refund",
        args={"order_id": order_id, "amount": amount, "reason": reason},
    )
    return {"refund_id": f"rf_{key[:12]}", "order_id": order_id, "amount": amount}


def build(deps: GraphDeps) -> AgentGraph:
    """The governed variant (registered as ``bench``)."""

    @governed_tool(sensitive=True)
    async def issue_refund(
        call: ToolCall,
        order_id: str = Field(pattern=r"^\d{4}$"),
        amount: float = Field(gt=0, le=10_000),
        reason: str = Field(default="customer request", max_length=200),
    ) -> dict[str, object]:
        """Refund money to the customer of an order. Moves money: needs approval."""
        return await refund(
            side_effects(deps),
            run_id=call.run_id,
            call_id=call.call_id,
            key=call.idempotency_key,
            order_id=order_id,
            amount=amount,
            reason=reason,
        )

    tools: list[GovernedTool] = [issue_refund]
    return build_agent(name=GRAPH, model=ScriptedChatModel(bench_script), tools=tools, deps=deps)


def build_bare(checkpointer: Any, effects: Any) -> Any:
    """The bare variant: the same state, nodes and Send fan-out, ``interrupt()`` in the tool."""
    model = ScriptedChatModel(bench_script)

    async def agent(state: AgentState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(list(state["messages"]))]}

    def route(state: AgentState) -> list[Send] | str:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            return [
                Send(
                    "tools",
                    ToolTask(
                        call=dict(tc),
                        run_id=state["run_id"],
                        started_by=state["started_by"],
                        tool_counts={},
                    ),
                )
                for tc in last.tool_calls
            ]
        return END

    async def tools(task: ToolTask, config: RunnableConfig) -> dict[str, Any]:
        call = task["call"]
        decision = interrupt({"call_id": call["id"], "tool": call["name"], "args": call["args"]})
        if not (isinstance(decision, dict) and decision.get("verdict") == "approve"):
            content = json.dumps({"error": {"code": "rejected"}})
        else:
            result = await refund(
                effects,
                run_id=task["run_id"],
                call_id=str(call["id"]),
                key=uuid.uuid5(uuid.NAMESPACE_URL, f"{task['run_id']}/{call['id']}").hex,
                **call["args"],
            )
            content = json.dumps(result, sort_keys=True)
        return {
            "messages": [ToolMessage(content=content, tool_call_id=call["id"], name=call["name"])]
        }

    builder = StateGraph(AgentState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)  # type: ignore[arg-type]
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer, name="bare")


def bare_run() -> tuple[str, RunnableConfig, dict[str, Any]]:
    """A new run of the bare agent: its id (its thread's too), its config and its input."""
    run_id = str(uuid.uuid4())
    config: RunnableConfig = {"configurable": {"thread_id": run_id}}
    payload = {
        "messages": [HumanMessage(content=MESSAGE)],
        "run_id": run_id,
        "started_by": REQUESTER,
    }
    return run_id, config, payload


#: What the bare agent's paused tool is resumed with.
BARE_APPROVAL: Command[Any] = Command(resume={"verdict": "approve", "principal": APPROVER})


def check_bare(what: str, paused: dict[str, Any], done: dict[str, Any]) -> None:
    """Raise unless the bare run paused, then finished with its refund."""
    if "__interrupt__" not in paused or not str(done["messages"][-1].content).startswith(
        "Refunded"
    ):
        raise RuntimeError(f"{what} did not pause and finish: {done['messages'][-1]}")
