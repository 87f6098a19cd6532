"""The e-mail agent: drafts a message (allowed) and sends it (needs approval).

Ask it "Email bob@example.com about the quarterly report".

An ordinary langchain ``create_agent`` agent with a scripted chat model, governed by
``ApprovalMiddleware`` with the e-mail policy; its tools are governed tools
(``GovernedTool.as_tool()``). ``build_classic`` is the same agent built with
``graphs.hosts.langgraph.agent.build_agent``.
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
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.tools import GovernedTool, ToolCall, governed_tool

POLICY = Path(__file__).parent / "policies" / "email.yaml"

ADDRESS = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"
#: A recipient argument is one address and nothing else: a schema's pattern only searches, so
#: "eve@elsewhere.net, bob@example.com" would pass an unanchored one.
ONE_ADDRESS = rf"^{ADDRESS}$"


def email_script(messages: list[BaseMessage]) -> AIMessage:
    text, results = current_turn(messages)
    recipient = re.search(ADDRESS, text)
    if recipient is None:
        return AIMessage(content="Whom should I write to? Please give an e-mail address.")
    topic = re.search(r"\babout (.+?)[.!?]?$", text.strip())
    subject = (topic.group(1) if topic else "your request").strip()[:120]
    drafts = [r for r in results if r.name == "draft_email"]
    sends = [r for r in results if r.name == "send_email"]
    if not drafts:
        return AIMessage(
            content="",
            tool_calls=[
                {
                    "id": "draft-1",
                    "name": "draft_email",
                    "args": {"to": recipient.group(0), "subject": subject},
                }
            ],
        )
    if not sends:
        draft = result_of(drafts[-1])
        return AIMessage(
            content="",
            tool_calls=[
                {
                    "id": "send-1",
                    "name": "send_email",
                    "args": {"to": draft["to"], "subject": draft["subject"], "body": draft["body"]},
                }
            ],
        )
    outcome = result_of(sends[-1])
    if "error" in outcome:
        return AIMessage(content=f"The e-mail was not sent: {outcome['error'].get('message')}")
    return AIMessage(content=f'Sent "{outcome["subject"]}" to {outcome["to"]}.')


def build(deps: GraphDeps, *, governance: Governance | None = None) -> Pregel[Any, Any, Any, Any]:
    """The agent, governed by ``policies/email.yaml`` unless ``governance`` says otherwise."""
    return create_agent(
        ScriptedToolModel(script=email_script),
        tools=[t.as_tool() for t in email_tools(deps)],
        middleware=[ApprovalMiddleware(governance=governance or _policy())],
        checkpointer=deps.checkpointer,
        name="email",
    )


def build_classic(deps: GraphDeps, *, governance: Governance | None = None) -> AgentGraph:
    """The same agent built with ``graphs.hosts.langgraph.agent.build_agent`` (the engine's own
    loop)."""
    return build_agent(
        name="email",
        model=ScriptedChatModel(email_script),
        tools=email_tools(deps),
        deps=deps,
        governance=governance or _policy(),
    )


def _policy() -> Governance:
    return Governance(interceptors=[load_policy(POLICY)], names=[f"policy:{POLICY.stem}"])


def email_tools(deps: GraphDeps) -> list[GovernedTool]:
    """``draft_email`` (allowed) and ``send_email`` (sensitive); a sent e-mail is recorded as
    a side effect in the examples' side-effect log
    (``graphs.examples.effects``)."""

    @governed_tool()
    async def draft_email(
        call: ToolCall,
        to: str = Field(pattern=ONE_ADDRESS, max_length=254),
        subject: str = Field(min_length=1, max_length=200),
    ) -> dict[str, str]:
        """Write a draft e-mail. Nothing leaves the building."""
        body = f"Hello,\n\nplease find the latest on {subject} attached.\n\nBest regards"
        return {"to": to, "subject": subject, "body": body}

    @governed_tool(sensitive=True)
    async def send_email(
        call: ToolCall,
        to: str = Field(pattern=ONE_ADDRESS, max_length=254),
        subject: str = Field(min_length=1, max_length=200),
        body: str = Field(min_length=1, max_length=10_000),
    ) -> dict[str, str]:
        """Send an e-mail to an outside address. Cannot be taken back: needs approval."""
        await side_effects(deps).record(
            run_id=call.run_id,
            call_id=call.call_id,
            tool="send_email",
            args={"to": to, "subject": subject, "body": body},
        )
        await external_call_latency()
        return {
            "message_id": f"<{call.idempotency_key[:16]}@approvals>",
            "to": to,
            "subject": subject,
        }

    return [draft_email, send_email]
