"""Shared pieces of the example agents: the slow-call knob and reading the conversation."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

DELAY_ENV = "APPROVALS_DEMO_TOOL_DELAY"


async def external_call_latency() -> None:
    """Example tools wait ``APPROVALS_DEMO_TOOL_DELAY`` seconds after their side effect, like a
    slow external system; fault tests use it to kill a worker in the middle of a call."""
    delay = float(os.environ.get(DELAY_ENV, "0") or 0)
    if delay > 0:
        await asyncio.sleep(delay)


def current_turn(messages: list[BaseMessage]) -> tuple[str, list[ToolMessage]]:
    """The latest user message and the tool results that came after it."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            content = messages[i].content
            text = content if isinstance(content, str) else ""
            results = [m for m in messages[i + 1 :] if isinstance(m, ToolMessage)]
            return text, results
    return "", []


def result_of(message: ToolMessage) -> dict[str, Any]:
    text = str(message.content)
    # After an approver's edit, the result follows HumanInTheLoopMiddleware's edit notice.
    notice, marker, result = text.partition("\n\nTool response:\n")
    if marker and notice.startswith("Note: a human reviewer replaced this tool call"):
        text = result
    try:
        value = json.loads(text)
    except ValueError:
        return {"error": {"message": str(message.content)}}
    return value if isinstance(value, dict) else {"value": value}
