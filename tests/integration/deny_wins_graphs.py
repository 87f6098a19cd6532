"""One refund agent per host, each governed by a policy that denies refunds above 40.00 and
by the host's own way of asking a human about every refund (``interrupt_on``, a sensitive
tool, ``needs_approval``), both naming ``issue_refund``: what ``test_deny_wins`` runs."""

from __future__ import annotations

from typing import Any

from agent_hooks import Decision, Verdict
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.pregel import Pregel

from approvals.policy import Policy, parse_policy
from graphs import ApprovalMiddleware, GovernedToolNode
from graphs.examples import openai_refund
from graphs.examples.refund import refund_script as example_refund_script
from graphs.examples.refund import refund_tools
from graphs.examples.scripted import ScriptedChatModel, ScriptedToolModel
from graphs.hooks.governance import Governance
from graphs.hooks.interceptors import EscalateSensitiveTools
from graphs.hosts.langgraph.agent import AgentGraph, build_agent
from graphs.hosts.openai import OpenAIAgent
from graphs.tool_call.deps import GraphDeps
from tests.integration import middleware_graphs
from tests.integration.middleware_graphs import refund_script

#: The limit both policies hold refunds to.
LIMIT = 40.0

DENY_BIG_REFUNDS = f"""
policy: deny-wins
version: 1
default: allow
rules:
  - id: no-big-refunds
    point: pre_tool_call
    tool: issue_refund
    when: args.amount > {LIMIT}
    action: deny
    reason: refunds above {LIMIT:.2f} are not issued here
"""

ESCALATE_EVERY_REFUND = """
policy: every-refund
version: 1
default: allow
rules:
  - id: refunds-need-support
    point: pre_tool_call
    tool: issue_refund
    action: escalate
    approvers: [support]
    reason: a refund needs a support lead
"""


def deny_big_refunds() -> Policy:
    return parse_policy(DENY_BIG_REFUNDS, "deny-wins.yaml")


class DenyBigRefunds:
    """The same limit as ``DENY_BIG_REFUNDS``, as a plain interceptor of the user's, placed
    after a policy that escalates every refund."""

    def intercept(self, ctx: dict[str, Any]) -> Verdict:
        call = ctx.get("tool_call") or {}
        if (
            ctx.get("interception_point") == "pre_tool_call"
            and call.get("name") == "issue_refund"
            and float((call.get("args") or {}).get("amount", 0)) > LIMIT
        ):
            return Verdict(decision=Decision.DENY, reason="over_the_limit", message="too much")
        return Verdict.allow()


def escalate_then_deny() -> Governance:
    """A user's governance: a policy escalating every refund, then a plain deny above 40."""
    return Governance(
        interceptors=[parse_policy(ESCALATE_EVERY_REFUND, "every-refund.yaml"), DenyBigRefunds()],
        names=["policy:every-refund", "limit"],
    )


def builder(deps: GraphDeps) -> AgentGraph:
    """``build_agent`` with the example's tools (``issue_refund`` is sensitive): the sensitive
    tool escalates, ahead of the policy that denies big refunds."""
    tools = refund_tools(deps)
    return build_agent(
        name="deny_wins_builder",
        model=ScriptedChatModel(example_refund_script),
        tools=tools,
        deps=deps,
        governance=Governance(
            interceptors=[
                EscalateSensitiveTools(t.name for t in tools if t.sensitive),
                deny_big_refunds(),
            ],
            names=["sensitive", "policy:deny-wins"],
        ),
    )


def middleware(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """``create_agent`` with ``ApprovalMiddleware(interrupt_on=..., policy=...)``."""
    return middleware_graphs._refund_agent(
        deps,
        ApprovalMiddleware(interrupt_on={"issue_refund": True}, policy=deny_big_refunds()),
    )


def middleware_escalate_then_deny(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """``create_agent`` with ``interrupt_on`` and a user's governance that escalates, then
    denies."""
    return middleware_graphs._refund_agent(
        deps,
        ApprovalMiddleware(interrupt_on={"issue_refund": True}, governance=escalate_then_deny()),
    )


def tool_node(deps: GraphDeps) -> StateGraph[Any, Any, Any, Any]:
    """A hand-built graph whose ``GovernedToolNode`` has ``interrupt_on`` and the policy."""
    model = ScriptedToolModel(script=refund_script)

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_node(
        "tools",
        GovernedToolNode(
            [middleware_graphs._recording_refund(deps)],
            interrupt_on={"issue_refund": True},
            policy=deny_big_refunds(),
        ),
    )
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder


def openai(deps: GraphDeps) -> OpenAIAgent:
    """The OpenAI example agent (``issue_refund`` has ``needs_approval=True``) under the policy."""
    governance = Governance(interceptors=[deny_big_refunds()], names=["policy:deny-wins"])
    return OpenAIAgent(openai_refund.refund_agent(deps), governance=governance)


def openai_escalate_then_deny(deps: GraphDeps) -> OpenAIAgent:
    """The OpenAI example agent under a governance that escalates, then denies."""
    return OpenAIAgent(openai_refund.refund_agent(deps), governance=escalate_then_deny())
