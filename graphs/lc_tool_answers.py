"""What a LangChain tool answered, to the engine: the result the execution ledger records and
``post_tool_call`` evaluates, and the message the model is given back (``ApprovalMiddleware``'s
tool seam, ``graphs.middleware``)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.types import Command


class ToolReportedError(RuntimeError):
    """The tool answered with an error result: recorded as a failed execution."""


def result_of(answer: ToolMessage | Command[Any]) -> Any:
    """What the ledger records for one execution, and ``post_tool_call`` evaluates: the tool
    message's content, or the object or array it is the JSON text of (LangChain turns a tool's
    dict into that text; a policy must see the dict, as a ``build_agent`` tool's)."""
    if isinstance(answer, Command):
        raise TypeError("the tool returned a Command, which ApprovalMiddleware cannot record yet")
    if answer.status == "error":
        raise ToolReportedError(str(answer.content)[:500])
    content = answer.content
    if isinstance(content, str):
        try:
            value = json.loads(content)
        except ValueError:
            return content
        if isinstance(value, dict | list):
            return value
    return content


def command_result(command: Command[Any], call_id: str) -> Any:
    """What the ledger records for a tool that returned a ``Command``: the content of its
    result message for this call (or that the command was applied)."""
    update = command.update
    if isinstance(update, dict):
        for m in update.get("messages") or []:
            if isinstance(m, ToolMessage) and m.tool_call_id == call_id:
                if m.status == "error":
                    raise ToolReportedError(str(m.content)[:500])
                return result_of(m)
    return {"command": "applied"}


def with_message(command: Command[Any], message: ToolMessage) -> Command[Any]:
    """``command`` with its result message for the call replaced by ``message`` (the result
    as ``post_tool_call`` released it), or ``message`` added when it carried none."""
    update = command.update if isinstance(command.update, dict) else {}
    kept = [
        m
        for m in update.get("messages") or []
        if not (isinstance(m, ToolMessage) and m.tool_call_id == message.tool_call_id)
    ]
    return dataclasses.replace(command, update={**update, "messages": [*kept, message]})


def as_model_sees(message: ToolMessage) -> ToolMessage:
    """The step's message with a text or content-block result given back as the tool gave it,
    not as the JSON text the ledger's record is replayed as (objects stay JSON text, as
    LangChain gives them)."""
    if message.status == "error":
        return message
    try:
        value = json.loads(str(message.content))
    except ValueError:
        return message
    if isinstance(value, str) or (
        isinstance(value, list)
        and all(isinstance(v, str) or (isinstance(v, dict) and "type" in v) for v in value)
    ):
        # Text, or content blocks (what an MCP tool answers with): given back as they were.
        return message.model_copy(update={"content": value})
    return message
