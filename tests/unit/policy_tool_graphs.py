"""Graphs whose policy names tools, one per host (``build_agent``, ``ApprovalMiddleware`` in
``create_agent``, ``GovernedToolNode``, an OpenAI Agents SDK agent), registered by
``tests/unit/test_policy_tool_names.py`` as a user's graphs are (``module:attr``).

Each agent has the tools ``lookup_customer`` and ``delete_customer``; ``POLICIES`` holds the
policy texts; the entry ``HOST__POLICY`` (``middleware__typo``) builds the agent of ``HOST``
with the policy ``POLICY``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.pregel import Pregel

from approvals.policy import Policy, parse_policy
from graphs import ApprovalMiddleware, GovernedToolNode
from graphs.examples.scripted import ScriptedChatModel, ScriptedToolModel
from graphs.hooks.governance import Governance
from graphs.hosts.langgraph.agent import AgentGraph, build_agent
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.tools import ToolCall, governed_tool

TOOLS = ("delete_customer", "lookup_customer")


def _policy(tool: str, extra: str = "") -> str:
    return (
        "policy: support\n"
        "default: allow\n"
        "rules:\n"
        "  - id: lookups-are-fine\n"
        "    point: pre_tool_call\n"
        "    tool: lookup_customer\n"
        "    action: allow\n"
        "  - id: deletes-need-approval\n"
        "    point: pre_tool_call\n"
        f"    tool: {tool}\n"
        f"{extra}"
        "    action: escalate\n"
        "    approvers: [support]\n"
    )


#: The policy texts, by what they show. The rule that names a tool is on line 8.
POLICIES: dict[str, str] = {
    "typo": _policy("delete_customr"),
    "absent_allowed": _policy("delete_customr", "    tool_may_be_absent: true\n"),
    "pattern_matches": _policy("delete_*"),
    "pattern_matches_nothing": _policy("remove_*"),
    "right": _policy("delete_customer"),
}


def _loaded(key: str) -> Policy:
    return parse_policy(POLICIES[key], "support.yaml")


def _script(messages: list[BaseMessage]) -> AIMessage:
    return AIMessage(content="nothing to do")


def _lc_tools() -> list[BaseTool]:
    @tool
    async def lookup_customer(customer_id: str) -> str:
        """Look a customer up."""
        return customer_id

    @tool
    async def delete_customer(customer_id: str) -> str:
        """Delete a customer."""
        return f"deleted {customer_id}"

    return [lookup_customer, delete_customer]


def built_agent(deps: GraphDeps, key: str) -> AgentGraph:
    @governed_tool()
    async def lookup_customer(call: ToolCall, customer_id: str) -> str:
        """Look a customer up."""
        return customer_id

    @governed_tool(sensitive=True)
    async def delete_customer(call: ToolCall, customer_id: str) -> str:
        """Delete a customer."""
        return f"deleted {customer_id}"

    return build_agent(
        name="support",
        model=ScriptedChatModel(_script),
        tools=[lookup_customer, delete_customer],
        deps=deps,
        governance=Governance(interceptors=[_loaded(key)], names=["policy:support"]),
    )


def middleware_agent(deps: GraphDeps, key: str) -> Pregel[Any, Any, Any, Any]:
    return create_agent(
        ScriptedToolModel(script=_script),
        tools=_lc_tools(),
        middleware=[ApprovalMiddleware(policy=_loaded(key))],
        checkpointer=deps.checkpointer,
    )


def tool_node_graph(deps: GraphDeps, key: str) -> StateGraph[Any, Any, Any, Any]:
    model = ScriptedToolModel(script=_script)

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_node("tools", GovernedToolNode(_lc_tools(), policy=_loaded(key)))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder


def openai_agent(deps: GraphDeps, key: str) -> Any:
    from agents import Agent, function_tool

    from graphs.hosts.openai import OpenAIAgent

    @function_tool
    def lookup_customer(customer_id: str) -> str:
        """Look a customer up."""
        return customer_id

    @function_tool
    def delete_customer(customer_id: str) -> str:
        """Delete a customer."""
        return f"deleted {customer_id}"

    agent = Agent(name="support", tools=[lookup_customer, delete_customer])
    return OpenAIAgent(agent, governance=Governance(interceptors=[_loaded(key)]))


HOSTS: dict[str, Callable[[GraphDeps, str], Any]] = {
    "built": built_agent,
    "middleware": middleware_agent,
    "tool_node": tool_node_graph,
    "openai": openai_agent,
}


def _entry(host: str, key: str) -> Callable[[GraphDeps], Any]:
    def factory(deps: GraphDeps) -> Any:
        return HOSTS[host](deps, key)

    return factory


for _host in HOSTS:
    for _key in POLICIES:
        globals()[f"{_host}__{_key}"] = _entry(_host, _key)
