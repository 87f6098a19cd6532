"""Graphs whose scripted models misuse tool call ids, and one that masks its input, registered
by configuration like a user's graphs (``module:attr``).

- ``reused_call_id``: the model pays 10 with call ``pay-1``, then, in a later turn of the same
  run, proposes ``pay-1`` again with 20 (a second payment under the first call's id).
- ``duplicate_call_ids``: one turn proposes two calls with the id ``pay-1`` (10 and 20) and a
  third, ``pay-2``.
- ``mask_input``: an ``input`` interceptor masks card numbers; another denies the word
  ``forbidden``.

``pay`` is sensitive (the default governance asks a human) and writes every real invocation to
the side-effect table, so a test sees how often it ran.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, NoReturn

from agent_hooks import ApprovalRequest, ApprovalResolution, Decision, Transform, Verdict
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from graphs.examples.demo import current_turn
from graphs.examples.effects import side_effects
from graphs.examples.scripted import ScriptedChatModel
from graphs.hooks.governance import Governance
from graphs.hosts.langgraph.agent import AgentGraph, build_agent
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.tools import GovernedTool, ToolCall, governed_tool

Context = dict[str, Any]


def _pay_tool(deps: GraphDeps) -> GovernedTool:
    @governed_tool(sensitive=True)
    async def pay(call: ToolCall, amount: float) -> dict[str, float]:
        """Pay an amount."""
        await side_effects(deps).record(
            run_id=call.run_id, call_id=call.call_id, tool="pay", args={"amount": amount}
        )
        return {"paid": amount}

    return pay


def _pay(call_id: str, amount: float) -> dict[str, Any]:
    return {"id": call_id, "name": "pay", "args": {"amount": amount}}


def _report(results: list[ToolMessage]) -> AIMessage:
    return AIMessage(content=" | ".join(str(r.content) for r in results))


def reuse_script(messages: list[BaseMessage]) -> AIMessage:
    _, results = current_turn(messages)
    if not results:
        return AIMessage(content="", tool_calls=[_pay("pay-1", 10.0)])
    if len(results) == 1:
        return AIMessage(content="", tool_calls=[_pay("pay-1", 20.0)])
    return _report(results)


def duplicate_script(messages: list[BaseMessage]) -> AIMessage:
    _, results = current_turn(messages)
    if not results:
        return AIMessage(
            content="",
            tool_calls=[_pay("pay-1", 10.0), _pay("pay-1", 20.0), _pay("pay-2", 30.0)],
        )
    return _report(results)


def reused_call_id(deps: GraphDeps) -> AgentGraph:
    return build_agent(
        name="reused_call_id",
        model=ScriptedChatModel(reuse_script),
        tools=[_pay_tool(deps)],
        deps=deps,
    )


def duplicate_call_ids(deps: GraphDeps) -> AgentGraph:
    return build_agent(
        name="duplicate_call_ids",
        model=ScriptedChatModel(duplicate_script),
        tools=[_pay_tool(deps)],
        deps=deps,
    )


class UnreadableDecisions:
    """An approval slot whose decision store cannot be read: what a failing database looks
    like to a tool step (the step must neither deny nor pause the call)."""

    awaiting_human = False
    failed = False

    async def resolve(self, request: ApprovalRequest, /) -> ApprovalResolution:
        self.failed = True
        raise RuntimeError("the decision store cannot be read")

    def suspend(self, context: dict[str, Any]) -> NoReturn:
        raise AssertionError("an unreadable slot never pauses")


def unreadable_decision(deps: GraphDeps) -> AgentGraph:
    """``pay`` escalates, and its decision cannot be read: the step fails as if the database
    went away."""
    return build_agent(
        name="unreadable_decision",
        model=ScriptedChatModel(reuse_script),
        tools=[_pay_tool(deps)],
        deps=dataclasses.replace(deps, slots=lambda new: UnreadableDecisions()),
    )


CARD = re.compile(r"\b\d{4}-\d{4}-\d{4}-\d{4}\b")


class GuardInput:
    """input: card numbers are masked; a message with the word ``forbidden`` is denied."""

    def intercept(self, ctx: Context, /) -> Verdict:
        if ctx.get("interception_point") != "input":
            return Verdict.allow()
        content = str(ctx["input"]["content"])
        if "forbidden" in content:
            return Verdict.deny(reason="forbidden_input", message="that is not asked here")
        if CARD.search(content):
            return Verdict(
                decision=Decision.TRANSFORM,
                reason="card_masked",
                transform=Transform(path="$target.content", value=CARD.sub("[card]", content)),
            )
        return Verdict.allow()


def echo_script(messages: list[BaseMessage]) -> AIMessage:
    text, _ = current_turn(messages)
    return AIMessage(content=json.dumps({"heard": text}))


def mask_input(deps: GraphDeps) -> AgentGraph:
    return build_agent(
        name="mask_input",
        model=ScriptedChatModel(echo_script),
        tools=[],
        deps=deps,
        governance=Governance(interceptors=(GuardInput(),)),
    )


GRAPHS = {
    name: f"tests.integration.call_id_graphs:{name}"
    for name in ("reused_call_id", "duplicate_call_ids", "mask_input", "unreadable_decision")
}
