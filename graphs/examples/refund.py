"""The refund agent: looks up orders (allowed) and issues refunds (needs approval).

Ask it "Please refund order 1001" or "Refund orders 1001 and 1002"; each refund is its own
call and its own approval request.

An ordinary langchain ``create_agent`` agent with a scripted chat model, governed by
``ApprovalMiddleware(policy=...)``. Its tools are governed tools (``GovernedTool.as_tool()``):
the middleware runs them with their own validation, pre- and postconditions and ``ToolCall``.
``build_classic`` is the same agent built with ``graphs.hosts.langgraph.agent.build_agent``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.pregel import Pregel
from pydantic import Field

from approvals.policy import load_policy
from graphs.examples.demo import current_turn, external_call_latency, result_of
from graphs.examples.effects import side_effects
from graphs.examples.scripted import ScriptedChatModel, ScriptedToolModel
from graphs.hooks.governance import Governance
from graphs.hosts.langgraph.agent import AgentGraph, build_agent
from graphs.langchain.middleware import ApprovalMiddleware
from graphs.tool_call.call import CheckResult, postcondition, precondition
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.tools import GovernedTool, ToolCall, governed_tool

POLICY = Path(__file__).parent / "policies" / "refund.yaml"

ORDERS: dict[str, dict[str, object]] = {
    "1001": {"order_id": "1001", "customer": "ada@example.com", "paid": 25.0, "status": "paid"},
    "1002": {"order_id": "1002", "customer": "alan@example.com", "paid": 120.0, "status": "paid"},
    "1003": {"order_id": "1003", "customer": "grace@example.com", "paid": 0.0, "status": "unpaid"},
    "1004": {"order_id": "1004", "customer": "edsger@example.com", "paid": 980.5, "status": "paid"},
}


def refund_script(messages: list[BaseMessage]) -> AIMessage:
    """Look up every order named, refund every paid one, then report."""
    text, results = current_turn(messages)
    order_ids = list(dict.fromkeys(re.findall(r"\b\d{4}\b", text)))
    if not order_ids:
        return AIMessage(content="Which order should I refund? Please give its number.")
    lookups = [r for r in results if r.name == "lookup_order"]
    refunds = [r for r in results if r.name == "issue_refund"]
    if not lookups:
        return AIMessage(
            content="",
            tool_calls=[
                {"id": f"lookup-{o}", "name": "lookup_order", "args": {"order_id": o}}
                for o in order_ids
            ],
        )
    if not refunds:
        calls = []
        for message in lookups:
            order = result_of(message)
            if order.get("status") == "paid":
                calls.append(
                    {
                        "id": f"refund-{order['order_id']}",
                        "name": "issue_refund",
                        "args": {
                            "order_id": order["order_id"],
                            "amount": order["paid"],
                            "reason": "customer request",
                        },
                    }
                )
        if calls:
            return AIMessage(content="", tool_calls=calls)
        return AIMessage(content="None of those orders can be refunded.")
    lines = []
    for message in refunds:
        outcome = result_of(message)
        if "error" in outcome:
            error = outcome["error"]
            lines.append(f"Refund not issued ({error.get('code')}): {error.get('message')}")
        elif "reconciled" in outcome:
            order = outcome.get("args", {}).get("order_id", "?")
            lines.append(f"The refund on order {order} went through (confirmed by an operator).")
        else:
            lines.append(f"Refunded {outcome['amount']:.2f} on order {outcome['order_id']}.")
    return AIMessage(content=" ".join(lines))


@precondition()
async def order_is_paid(args: dict[str, Any], call: ToolCall) -> CheckResult:
    """The order exists and is paid."""
    order = ORDERS.get(args["order_id"])
    if order is None:
        return f"order {args['order_id']} does not exist"
    return order["status"] == "paid" or f"order {args['order_id']} is not paid"


@precondition()
async def amount_within_paid(args: dict[str, Any], call: ToolCall) -> CheckResult:
    """The refund is no more than what the customer paid."""
    order = ORDERS.get(args["order_id"]) or {}
    paid = float(order.get("paid", 0.0))  # type: ignore[arg-type]
    return args["amount"] <= paid or f"{args['amount']:.2f} is more than the {paid:.2f} paid"


@postcondition()
async def refund_has_an_id(args: dict[str, Any], call: ToolCall, result: Any) -> CheckResult:
    """The payment system answered with a refund id."""
    return isinstance(result, dict) and str(result.get("refund_id", "")).startswith("rf_")


def build(deps: GraphDeps, *, governance: Governance | None = None) -> Pregel[Any, Any, Any, Any]:
    """The agent, governed by ``policies/refund.yaml`` unless ``governance`` says otherwise."""
    return create_agent(
        ScriptedToolModel(script=refund_script),
        tools=[t.as_tool() for t in refund_tools(deps)],
        middleware=[ApprovalMiddleware(governance=governance or _policy())],
        checkpointer=deps.checkpointer,
        name="refund",
    )


def build_classic(deps: GraphDeps, *, governance: Governance | None = None) -> AgentGraph:
    """The same agent built with ``graphs.hosts.langgraph.agent.build_agent`` (the engine's own
    loop)."""
    return build_agent(
        name="refund",
        model=ScriptedChatModel(refund_script),
        tools=refund_tools(deps),
        deps=deps,
        governance=governance or _policy(),
    )


def _policy() -> Governance:
    return Governance(interceptors=[load_policy(POLICY)], names=[f"policy:{POLICY.stem}"])


def refund_tools(deps: GraphDeps) -> list[GovernedTool]:
    """``lookup_order`` (allowed) and ``issue_refund`` (sensitive, with its conditions); the
    refund is recorded as a side effect in the examples' side-effect log
    (``graphs.examples.effects``)."""

    @governed_tool()
    async def lookup_order(
        call: ToolCall, order_id: str = Field(pattern=r"^\d{4}$")
    ) -> dict[str, object]:
        """Look up an order by its four-digit number."""
        order = ORDERS.get(order_id)
        return dict(order) if order else {"order_id": order_id, "status": "not_found"}

    @governed_tool(
        sensitive=True,
        preconditions=[order_is_paid, amount_within_paid],
        postconditions=[refund_has_an_id],
        risk="high",
        approver_group="finance",
    )
    async def issue_refund(
        call: ToolCall,
        order_id: str = Field(pattern=r"^\d{4}$"),
        amount: float = Field(gt=0, le=10_000),
        reason: str = Field(default="customer request", max_length=200),
    ) -> dict[str, object]:
        """Refund money to the customer of an order. Moves money: needs approval."""
        await side_effects(deps).record(
            run_id=call.run_id,
            call_id=call.call_id,
            tool="issue_refund",
            args={"order_id": order_id, "amount": amount, "reason": reason},
        )
        await external_call_latency()
        return {
            "refund_id": f"rf_{call.idempotency_key[:12]}",
            "order_id": order_id,
            "amount": amount,
        }

    return [lookup_order, issue_refund]
