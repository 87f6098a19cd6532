"""``create_agent`` agents with a structured answer (``response_format``), governed by
``ApprovalMiddleware``: the refund is approved first, then the model answers with a summary
that quotes a card number, which an ``output`` policy masks (or denies, or a human reads)."""

from __future__ import annotations

import json
import re
from typing import Any

from agent_hooks import Decision, Transform, Verdict
from langchain.agents import create_agent
from langchain.agents.structured_output import ProviderStrategy, ToolStrategy
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.pregel import Pregel
from pydantic import BaseModel

from approvals.policy import parse_policy
from graphs import ApprovalMiddleware
from graphs.examples.scripted import ScriptedToolModel
from graphs.hooks.governance import Governance
from graphs.tool_call.deps import GraphDeps

CARD = "4111111111111111"

POLICY = r"""
policy: answers
default: allow
rules:
  - id: refunds-need-approval
    point: pre_tool_call
    tool: issue_refund
    action: escalate
  - id: no-card-numbers-out
    point: output
    action: transform
    mask: {pattern: '\b\d{16}\b', replacement: '[card]'}
"""

DENY_POLICY = r"""
policy: answers
default: allow
rules:
  - id: refunds-need-approval
    point: pre_tool_call
    tool: issue_refund
    action: escalate
  - id: no-card-numbers-out
    point: output
    when: content.note.contains("4111")
    action: deny
    reason: the answer quotes a card number
"""

REVIEW_POLICY = r"""
policy: answers
default: allow
rules:
  - id: refunds-need-approval
    point: pre_tool_call
    tool: issue_refund
    action: escalate
  - id: answers-are-read
    point: output
    action: escalate
    approvers: [support]
"""


class RefundSummary(BaseModel):
    order_id: str
    amount: float
    note: str


def _script(*, in_content: bool) -> Any:
    """``refund ORDER AMOUNT``: one ``issue_refund`` call; then the summary, as a call of the
    schema's tool (``ToolStrategy``) or as JSON content (``ProviderStrategy``)."""

    def script(messages: list[BaseMessage]) -> AIMessage:
        text, results = "", list[ToolMessage]()
        for m in messages:
            if isinstance(m, HumanMessage):
                text, results = str(m.content), []
            elif isinstance(m, ToolMessage):
                results.append(m)
        order, amount = re.findall(r"(\d{4}) (\d+)", text)[0]
        if not results:
            return AIMessage(
                content="",
                tool_calls=[
                    {
                        "id": f"refund-{order}",
                        "name": "issue_refund",
                        "args": {"order_id": order, "amount": float(amount)},
                    }
                ],
            )
        summary = {
            "order_id": order,
            "amount": float(amount),
            "note": f"{results[-1].content}; card {CARD}",
        }
        if in_content:
            return AIMessage(content=json.dumps(summary))
        return AIMessage(
            content="", tool_calls=[{"id": "summary-1", "name": "RefundSummary", "args": summary}]
        )

    return script


@tool
async def issue_refund(order_id: str, amount: float) -> str:
    """Refund money on an order."""
    return f"refunded {amount:.2f} on {order_id}"


class BreakTheAnswer:
    """output: rewrites the answer into one ``RefundSummary`` refuses (no order id)."""

    def intercept(self, ctx: dict[str, Any], /) -> Verdict:
        if ctx.get("interception_point") == "output":
            return Verdict(
                decision=Decision.TRANSFORM,
                reason="break_it",
                transform=Transform(path="$target.content", value={"note": "gone"}),
            )
        return Verdict.allow()


def _agent(
    deps: GraphDeps, policy: str, *, in_content: bool = False, governance: Governance | None = None
) -> Pregel[Any, Any, Any, Any]:
    strategy: Any = ProviderStrategy(RefundSummary) if in_content else ToolStrategy(RefundSummary)
    return create_agent(
        ScriptedToolModel(script=_script(in_content=in_content)),
        tools=[issue_refund],
        response_format=strategy,
        middleware=[
            ApprovalMiddleware(policy=parse_policy(policy, "answers.yaml"), governance=governance)
        ],
        checkpointer=deps.checkpointer,
        name="summaries",
    )


def tool_strategy(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    return _agent(deps, POLICY)


def provider_strategy(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    return _agent(deps, POLICY, in_content=True)


def denied(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    return _agent(deps, DENY_POLICY)


def reviewed(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    return _agent(deps, REVIEW_POLICY)


def broken(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    return _agent(deps, POLICY, governance=Governance(interceptors=(BreakTheAnswer(),)))
