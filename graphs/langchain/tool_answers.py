"""What a LangChain tool answered, to the engine: the result the execution ledger records and
``post_tool_call`` evaluates, and the message the model is given back (``ApprovalMiddleware``'s
tool seam, ``graphs.langchain.middleware``)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.types import Command

from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.execution import WithStateUpdate


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


def command_result(command: Command[Any], call_id: str) -> WithStateUpdate:
    """What the ledger records for a tool that returned a ``Command``: the content of its
    result message for this call (or that the command was applied), and the command without
    that message (what the graph gets again when the ledger answers for the call; ``None``
    when nothing else is in it)."""
    update = command.update
    result: Any = {"command": "applied"}
    rest: Command[Any] | None = None
    if isinstance(update, dict):
        for m in update.get("messages") or []:
            if isinstance(m, ToolMessage) and m.tool_call_id == call_id:
                if m.status == "error":
                    raise ToolReportedError(str(m.content)[:500])
                result = result_of(m)
                break
        # The call's own message is its result, given back as post_tool_call releases it:
        # never kept here, where a withheld or masked result would survive.
        kept = {**update, "messages": _others(update.get("messages") or [], call_id)}
        if not kept["messages"]:
            del kept["messages"]
        if kept or command.goto or command.graph is not None:
            rest = dataclasses.replace(command, update=kept)
    return WithStateUpdate(result=result, state_update=rest)


async def recorded_command(deps: GraphDeps, run_id: str, call_id: str) -> Command[Any] | None:
    """The ``Command`` (less the call's own result message) that call ``call_id`` of run
    ``run_id`` returned when it ran, as the ledger keeps it; ``None`` when it returned none,
    or did not run."""
    for execution in await deps.ledger.for_run(run_id):
        if execution.call_id == call_id and execution.state_update is not None:
            command = deps.checkpointer.serde.loads_typed(execution.state_update)
            return command if isinstance(command, Command) else None
    return None


def _others(messages: list[Any], call_id: str) -> list[Any]:
    return [m for m in messages if not (isinstance(m, ToolMessage) and m.tool_call_id == call_id)]


def with_message(command: Command[Any], message: ToolMessage) -> Command[Any]:
    """``command`` with its result message for the call replaced by ``message`` (the result
    as ``post_tool_call`` released it), or ``message`` added when it carried none."""
    update = command.update if isinstance(command.update, dict) else {}
    kept = _others(update.get("messages") or [], message.tool_call_id)
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
