"""The refund agent on the OpenAI Agents SDK: the same conversation as ``refund``, with an
``agents.Agent``, ``@function_tool``\\ s and a scripted ``agents.models.interface.Model`` (no
network, no API key; tracing off).

``issue_refund`` says ``needs_approval=True``, and the agent is governed by the same policy file
as the LangGraph example (``policies/refund.yaml``: support approves refunds, finance those
above 100.00, none above 1000.00). Registered as ``refund_openai``.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, ModelSettings, function_tool, set_tracing_disabled
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model, ModelTracing
from agents.tool import Tool
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputItem,
    ResponseOutputMessage,
    ResponseOutputText,
)

from approvals.policy import load_policy
from graphs.examples.demo import external_call_latency
from graphs.examples.effects import side_effects
from graphs.examples.refund import ORDERS, POLICY
from graphs.hooks.governance import Governance
from graphs.hosts.openai import OpenAIAgent, current_call
from graphs.tool_call.deps import GraphDeps

# No trace is ever sent anywhere: the example runs offline.
set_tracing_disabled(True)

#: What the script answers one turn with: ``(tool calls, final text)``.
Calls = list[tuple[str, str, dict[str, Any]]]


def conversation(items: str | list[TResponseInputItem]) -> tuple[str, dict[str, Any]]:
    """The latest user message and the output of every call since, by call id."""
    if isinstance(items, str):
        return items, {}
    text, outputs = "", dict[str, Any]()
    for item in items:
        data: Any = item if isinstance(item, dict) else getattr(item, "model_dump", dict)()
        if data.get("role") == "user":
            content = data.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            outputs = {}
        elif data.get("type") == "function_call_output":
            outputs[str(data.get("call_id"))] = data.get("output")
    return text, outputs


def parsed(output: Any) -> dict[str, Any]:
    """A call's output as an object (a JSON text, the SDK's ``str()`` of a dict, or text)."""
    if isinstance(output, dict):
        return output
    text = str(output)
    try:
        value = json.loads(text)
    except ValueError:
        try:
            value = json.loads(text.replace("'", '"'))
        except ValueError:
            return {"text": text}
    return value if isinstance(value, dict) else {"text": text}


def refund_script(text: str, outputs: dict[str, Any]) -> tuple[Calls, str]:
    """Look up every order named, refund every paid one (all in one turn), then report."""
    order_ids = list(dict.fromkeys(re.findall(r"\b\d{4}\b", text)))
    if not order_ids:
        return [], "Which order should I refund? Please give its number."
    lookups = {o: outputs.get(f"lookup-{o}") for o in order_ids}
    if any(v is None for v in lookups.values()):
        return [(f"lookup-{o}", "lookup_order", {"order_id": o}) for o in order_ids], ""
    refunds = [f"refund-{o}" for o in order_ids if f"refund-{o}" in outputs]
    if not refunds:
        calls: Calls = []
        for o in order_ids:
            order = parsed(lookups[o])
            if order.get("status") == "paid":
                args = {"order_id": o, "amount": order["paid"], "reason": "customer request"}
                calls.append((f"refund-{o}", "issue_refund", args))
        return calls, "" if calls else "None of those orders can be refunded."
    lines = []
    for call_id in refunds:
        outcome = parsed(outputs[call_id])
        if "refund_id" in outcome:
            lines.append(f"Refunded {float(outcome['amount']):.2f} on order {outcome['order_id']}.")
        elif "error" in outcome and isinstance(outcome["error"], dict):
            error = outcome["error"]
            lines.append(f"Refund not issued ({error.get('code')}): {error.get('message')}")
        else:
            lines.append(f"Refund not issued: {outcome.get('text', outcome)}")
    return [], " ".join(lines)


class ScriptedModel(Model):
    """A model whose answer is a pure function of its input (``script``): the same input
    gives the same calls with the same ids, in any process."""

    def __init__(self, script: Any = refund_script) -> None:
        self._script = script

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any | None,
        **more: Any,
    ) -> ModelResponse:
        return ModelResponse(output=self._output(input), usage=Usage(), response_id=None)

    def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any | None,
        **more: Any,
    ) -> AsyncIterator[TResponseStreamEvent]:
        """The same answer as one completed response (no text deltas)."""
        return self._streamed(input)

    async def _streamed(
        self, input: str | list[TResponseInputItem]
    ) -> AsyncIterator[TResponseStreamEvent]:
        response = Response.model_construct(  # type: ignore[call-arg]
            id="resp-scripted", output=self._output(input), usage=None
        )
        yield ResponseCompletedEvent.model_construct(  # type: ignore[call-arg]
            type="response.completed", response=response
        )

    def _output(self, input: str | list[TResponseInputItem]) -> list[ResponseOutputItem]:
        text, outputs = conversation(input)
        calls, answer = self._script(text, outputs)
        out: list[ResponseOutputItem] = [
            ResponseFunctionToolCall(
                type="function_call",
                id=f"fc-{call_id}",
                call_id=call_id,
                name=name,
                arguments=json.dumps(args, sort_keys=True),
                status="completed",
            )
            for call_id, name, args in calls
        ]
        if not calls:
            out.append(
                ResponseOutputMessage(
                    type="message",
                    id="msg-answer",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=answer, annotations=[])],
                )
            )
        return out


def refund_agent(deps: GraphDeps) -> Agent[Any]:
    """The agent: ``lookup_order`` runs freely, ``issue_refund`` needs approval."""

    @function_tool
    async def lookup_order(order_id: str) -> dict[str, object]:
        """Look up an order by its four-digit number."""
        order = ORDERS.get(order_id)
        return dict(order) if order else {"order_id": order_id, "status": "not_found"}

    @function_tool(needs_approval=True)
    async def issue_refund(
        order_id: str, amount: float, reason: str = "customer request"
    ) -> dict[str, object]:
        """Refund money to the customer of an order. Moves money: needs approval."""
        call = current_call()
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

    return Agent(
        name="refund_openai",
        instructions="Look up the orders the customer names and refund the paid ones.",
        model=ScriptedModel(),
        tools=[lookup_order, issue_refund],
    )


def build(deps: GraphDeps) -> OpenAIAgent:
    """The agent, governed by ``policies/refund.yaml`` and its tools' ``needs_approval``."""
    governance = Governance(interceptors=[load_policy(POLICY)], names=[f"policy:{POLICY.stem}"])
    return OpenAIAgent(refund_agent(deps), governance=governance)
