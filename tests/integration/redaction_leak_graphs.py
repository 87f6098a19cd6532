"""A graph whose tool echoes a redacted card number in its result, and whose model quotes that
result in its answer: a later request (the answer's ``output`` approval) must not show the
number to its approvers."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from pydantic import Field

from approvals.policy import parse_policy
from graphs.examples.scripted import ScriptedChatModel
from graphs.hooks.governance import Governance
from graphs.hosts.langgraph.agent import AgentGraph, build_agent
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.tools import ToolCall, governed_tool
from tests.integration.redaction_graphs import ARGS, CALL_ID, NO_BILLING

POLICY = """\
policy: card-echo
default: allow
rules:
  - id: charges-need-finance
    point: pre_tool_call
    tool: charge_card
    action: escalate
    approvers: [finance]
    reason: a card charge needs finance
    redact: [args.card_number, args.billing.cvv]
  - id: answers-need-review
    point: output
    action: escalate
    approvers: [reviewers]
    reason: every answer is reviewed
"""


def script(messages: list[BaseMessage]) -> AIMessage:
    if isinstance(messages[-1], ToolMessage):
        return AIMessage(content=f"Done. The tool said: {messages[-1].content}")
    return AIMessage(
        content="", tool_calls=[{"id": CALL_ID, "name": "charge_card", "args": dict(ARGS)}]
    )


def build(deps: GraphDeps) -> AgentGraph:
    @governed_tool(sensitive=True)
    async def charge_card(
        call: ToolCall,
        card_number: str = Field(pattern=r"^\d{16}$"),
        amount: float = Field(gt=0, le=1000),
        billing: dict[str, str] = NO_BILLING,
    ) -> dict[str, Any]:
        """Charge an amount to a card."""
        # A careless tool: its free text repeats the whole card number and security code.
        cvv = billing.get("cvv", "")
        return {"receipt": f"charged {amount:.2f} to card {card_number} (cvv {cvv})"}

    policy = parse_policy(POLICY, "card-echo.yaml")
    return build_agent(
        name="card-echo",
        model=ScriptedChatModel(script),
        tools=[charge_card],
        deps=deps,
        governance=Governance(interceptors=[policy], names=["policy:card-echo"]),
    )
