"""A graph whose policy redacts a card number and its security code from what approvers see:
its model proposes one card charge."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from pydantic import Field

from approvals.policy import parse_policy
from graphs.examples.effects import side_effects
from graphs.examples.scripted import ScriptedChatModel
from graphs.hooks.governance import Governance
from graphs.hosts.langgraph.agent import AgentGraph, build_agent
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.tools import ToolCall, governed_tool

CARD = "4111111111111111"
CVV = "737"
#: What the model proposes: the full arguments, which run and which the identity binds.
ARGS: dict[str, Any] = {
    "card_number": CARD,
    "amount": 42.0,
    "billing": {"name": "Ada Lovelace", "cvv": CVV},
}
CALL_ID = "charge-1"
NO_BILLING: Any = Field(default_factory=dict)

POLICY = """\
policy: cards
default: allow
rules:
  - id: no-big-charges-on-test-cards
    point: pre_tool_call
    tool: charge_card
    when: args.amount > 500.0 && args.card_number.startsWith("4111")
    priority: 10
    action: deny
    reason: test cards are never charged more than 500.00
  - id: charges-need-finance
    point: pre_tool_call
    tool: charge_card
    action: escalate
    approvers: [finance]
    reason: a card charge needs finance
    redact: [args.card_number, args.billing.cvv]
"""


def script(messages: list[BaseMessage]) -> AIMessage:
    if isinstance(messages[-1], ToolMessage):
        return AIMessage(content=f"tool said: {messages[-1].content}")
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
        await side_effects(deps).record(
            run_id=call.run_id,
            call_id=call.call_id,
            tool="charge_card",
            args={"card_number": card_number, "amount": amount, "billing": billing},
        )
        return {"charged": amount, "card": f"ending {card_number[-4:]}"}

    policy = parse_policy(POLICY, "cards.yaml")
    return build_agent(
        name="cards",
        model=ScriptedChatModel(script),
        tools=[charge_card],
        deps=deps,
        governance=Governance(interceptors=[policy], names=["policy:cards"]),
    )
