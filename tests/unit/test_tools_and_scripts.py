"""Tools carry their schema; example models are deterministic functions of the conversation."""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId, StructuredTool, tool
from pydantic import BaseModel, Field, ValidationError

from approvals.errors import InvalidRunInput
from graphs.examples.email import email_script
from graphs.examples.refund import refund_script
from graphs.hooks.interceptors import EscalateSensitiveTools
from graphs.langchain.tools import from_langchain
from graphs.run.input import parse_input
from graphs.tool_call.tools import ToolCall, governed_tool


def test_governed_tool_schema_comes_from_type_hints() -> None:
    @governed_tool(sensitive=True)
    async def transfer(call: ToolCall, iban: str, amount: float = Field(gt=0)) -> dict[str, str]:
        """Move money."""
        return {}

    schema = transfer.args_schema()
    assert schema["required"] == ["iban", "amount"]
    assert schema["properties"]["amount"]["exclusiveMinimum"] == 0
    assert schema["additionalProperties"] is False
    assert transfer.sensitive
    assert transfer.description == "Move money."
    with pytest.raises(ValidationError):
        transfer.validate({"iban": "x", "amount": 0})
    with pytest.raises(ValidationError):
        transfer.validate({"iban": "x", "amount": 1, "memo": "extra"})


def test_a_tool_must_take_the_call_first() -> None:
    with pytest.raises(TypeError):

        @governed_tool()
        async def wrong(amount: float) -> None:
            return None


def test_refund_script_walks_lookup_refund_report() -> None:
    first = refund_script([HumanMessage("refund 1001 and 1003")])
    assert [c["name"] for c in first.tool_calls] == ["lookup_order", "lookup_order"]
    lookups = [
        ToolMessage(
            json.dumps({"order_id": "1001", "paid": 25.0, "status": "paid"}),
            tool_call_id="lookup-1001",
            name="lookup_order",
        ),
        ToolMessage(
            json.dumps({"order_id": "1003", "paid": 0.0, "status": "unpaid"}),
            tool_call_id="lookup-1003",
            name="lookup_order",
        ),
    ]
    second = refund_script([HumanMessage("refund 1001 and 1003"), first, *lookups])
    assert [c["args"]["order_id"] for c in second.tool_calls] == ["1001"]
    assert second.tool_calls[0]["id"] == "refund-1001"
    refunded = ToolMessage(
        json.dumps({"order_id": "1001", "amount": 25.0, "refund_id": "x"}),
        tool_call_id="refund-1001",
        name="issue_refund",
    )
    third = refund_script([HumanMessage("refund 1001 and 1003"), first, *lookups, second, refunded])
    assert third.content == "Refunded 25.00 on order 1001."
    assert not third.tool_calls


def test_email_script_drafts_then_sends() -> None:
    ask = HumanMessage("Email bob@example.com about the launch")
    first = email_script([ask])
    assert first.tool_calls[0]["name"] == "draft_email"
    assert first.tool_calls[0]["args"] == {"to": "bob@example.com", "subject": "the launch"}
    draft = ToolMessage(
        json.dumps({"to": "bob@example.com", "subject": "the launch", "body": "b"}),
        tool_call_id="draft-1",
        name="draft_email",
    )
    second = email_script([ask, first, draft])
    assert second.tool_calls[0]["name"] == "send_email"
    assert isinstance(email_script([HumanMessage("hello")]), AIMessage)


def test_only_sensitive_tools_escalate() -> None:
    interceptor = EscalateSensitiveTools(["issue_refund"])
    ctx = {"interception_point": "pre_tool_call", "tool_call": {"name": "issue_refund"}}
    assert interceptor.intercept(ctx).is_liftable
    ctx["tool_call"] = {"name": "lookup_order"}
    assert interceptor.intercept(ctx).decision.permits
    assert interceptor.intercept({"interception_point": "output"}).decision.permits


@pytest.mark.parametrize("value", [None, [], {"message": "  "}, {"message": "x" * 20_001}])
def test_run_input_must_be_a_message(value: object) -> None:
    with pytest.raises(InvalidRunInput):
        parse_input(value)


async def test_a_langchain_tool_is_governed_with_its_schema_and_key() -> None:

    class Payout(BaseModel):
        account: str
        cents: int = Field(gt=0)

    seen: list[dict[str, object]] = []

    async def pay(account: str, cents: int, config: RunnableConfig) -> str:
        seen.append(dict(config.get("metadata") or {}))
        return f"paid {cents} to {account}"

    lc_tool = StructuredTool.from_function(
        coroutine=pay, name="payout", description="Pay out.", args_schema=Payout
    )
    governed = from_langchain(lc_tool, sensitive=True)
    assert governed.sensitive
    assert governed.args_schema()["required"] == ["account", "cents"]
    with pytest.raises(ValidationError):
        governed.validate({"account": "a", "cents": 0})
    call = ToolCall(run_id="r", call_id="c", tool="payout", idempotency_key="k-1", principal="p")
    result = await governed.fn(governed.validate({"account": "acct_1", "cents": 5}), call)
    assert result == "paid 5 to acct_1"
    assert seen[0]["idempotency_key"] == "k-1"


async def test_conditions_hold_fail_with_a_reason_or_fail_closed() -> None:
    from graphs.tool_call.call import first_failure, precondition

    @precondition()
    async def holds(args: dict[str, object], call: ToolCall) -> bool:
        """Always holds."""
        return True

    @precondition()
    async def silent(args: dict[str, object], call: ToolCall) -> None:
        return None

    @precondition(name="small")
    async def small_amount(args: dict[str, object], call: ToolCall) -> bool:
        """Amount is small."""
        return float(args["amount"]) < 10  # type: ignore[arg-type]

    @precondition()
    async def explains(args: dict[str, object], call: ToolCall) -> str:
        return "not today"

    @precondition()
    async def broken(args: dict[str, object], call: ToolCall) -> bool:
        raise RuntimeError("lookup down")

    call = ToolCall(run_id="r", call_id="c", tool="t", idempotency_key="k", principal="p")
    assert await first_failure([holds, silent], {"amount": 50}, call) is None
    failed = await first_failure([holds, small_amount, explains], {"amount": 50}, call)
    assert failed is not None
    assert failed.to_json() == {"condition": "small", "message": "Amount is small."}
    failed = await first_failure([explains], {}, call)
    assert failed is not None
    assert failed.message == "not today"
    failed = await first_failure([broken, holds], {}, call)
    assert failed is not None
    assert failed.condition == "broken"
    assert "RuntimeError: lookup down" in failed.message


def test_a_tool_describes_its_validation() -> None:
    from graphs.examples.refund import amount_within_paid, order_is_paid

    @governed_tool(
        sensitive=True,
        preconditions=[order_is_paid, amount_within_paid],
        risk="high",
        estimated_cost=0.02,
        approver_group="finance",
    )
    async def refund(call: ToolCall, order_id: str, amount: float) -> None:
        """Refund."""

    described = refund.describe()
    assert [c["name"] for c in described["preconditions"]] == [
        "order_is_paid",
        "amount_within_paid",
    ]
    assert described["preconditions"][0]["description"] == "The order exists and is paid."
    assert described["risk"] == "high"
    assert described["approver_group"] == "finance"
    assert described["arguments"]["required"] == ["order_id", "amount"]


def test_tool_counts_cover_the_current_run_only() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from graphs.langchain.history import tool_counts as _tool_counts

    def result(name: str, status: str = "success") -> ToolMessage:
        return ToolMessage(content="{}", tool_call_id=f"{name}-id", name=name, status=status)

    thread = [
        HumanMessage(content="first run"),
        AIMessage(content=""),
        result("issue_refund"),
        HumanMessage(content="second run"),
        AIMessage(content=""),
        result("issue_refund"),
        result("lookup_order"),
        result("issue_refund", status="error"),
    ]
    assert _tool_counts(thread) == {"issue_refund": 1, "lookup_order": 1}


def test_a_sync_function_is_refused_as_a_governed_tool_when_declared() -> None:
    """Refused at declaration, never after a human approved a call of it."""
    with pytest.raises(TypeError, match="async function"):

        @governed_tool(sensitive=True)  # type: ignore[arg-type]  # the mistake under test
        def pay(call: ToolCall, amount: float) -> dict[str, float]:
            return {"paid": amount}


async def test_a_json_schema_langchain_tool_is_governed_with_that_schema() -> None:
    async def add(**kwargs: Any) -> int:
        return int(kwargs["n"]) + 1

    lc_tool = StructuredTool(
        name="add_one",
        description="Add one.",
        args_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        coroutine=add,
    )
    governed = from_langchain(lc_tool, sensitive=True)
    assert governed.args_schema()["properties"] == {"n": {"type": "integer"}}
    assert governed.validate({"n": 2}).model_dump(mode="json") == {"n": 2}
    with pytest.raises(ValidationError):
        governed.validate({"n": "two"})


def test_a_langchain_tool_with_injected_arguments_is_refused_when_wrapped() -> None:
    @tool
    def reply(text: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Reply."""
        return text

    with pytest.raises(TypeError, match="tool_call_id"):
        from_langchain(reply)
