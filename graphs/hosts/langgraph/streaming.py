"""A step's LangGraph updates as run events: what a run's stream (``GET /api/v1/runs/{id}/
events``, ``approvals runs start --stream``) shows while the step runs.

The runner runs the graph with ``astream`` in "updates" mode (and "values", for its result,
exactly as ``ainvoke`` builds it). Each node update becomes one small event: the node's name,
and for each message the node added that is the agent's own (an AI message) its text and the
names of the tools it called. Never a call's arguments (which the caller may not be allowed to
see, or see only redacted), nor a tool's result.

Tokens are not streamed ("messages" mode is not used): a message is sent once the node that
produced it has finished, so a final answer is sent only after ``post_model_call`` and
``output`` allowed it, as they left it, whether or not the host buffers its model's output.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.pregel import Pregel
from langgraph.types import Command

# Publish is named here too: the engine's start takes an observer of that type.
from graphs.run.step_events import Publish as Publish

#: Keeps an event small: longer message text is cut.
MAX_CONTENT = 20_000
_INTERRUPT = "__interrupt__"


def text_of(message: AIMessage) -> str:
    """A message's text: its string content, or its text blocks joined."""
    content = message.content
    if isinstance(content, str):
        return content[:MAX_CONTENT]
    parts = [
        block if isinstance(block, str) else str(block.get("text", ""))
        for block in content
        if isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")
    ]
    return "".join(parts)[:MAX_CONTENT]


def _messages_in(update: Any) -> list[Any]:
    if isinstance(update, Command):
        return _messages_in(update.update)
    if isinstance(update, list | tuple):
        return [m for item in update for m in _messages_in(item)]
    if isinstance(update, dict):
        found = update.get("messages")
        if isinstance(found, list | tuple):
            return list(found)
        return [found] if found is not None else []
    return []


def update_data(update: Any) -> dict[str, Any]:
    """An event's data for one node's update: the agent's own messages, text and tool names."""
    messages = [
        {"content": text_of(m), "tool_calls": [str(tc["name"]) for tc in m.tool_calls]}
        for m in _messages_in(update)
        if isinstance(m, AIMessage)
    ]
    return {"messages": messages}


async def invoke_streaming(
    graph: Pregel[Any, Any, Any, Any],
    payload: Any,
    config: RunnableConfig,
    *,
    context: dict[str, Any] | None,
    publish: Publish,
) -> Any:
    """What ``graph.ainvoke(payload, config, context=context, durability="sync")`` returns,
    publishing each node's update as it happens."""
    latest: Any = None
    interrupts: list[Any] = []
    async for mode, chunk in graph.astream(
        payload, config, context=context, durability="sync", stream_mode=["updates", "values"]
    ):
        if mode == "values":
            latest = chunk
            continue
        if not isinstance(chunk, dict):
            continue
        for node, update in chunk.items():
            if node == _INTERRUPT:
                interrupts.extend(update)
                continue
            if update is None and node.endswith(".after_model"):
                # ApprovalMiddleware's after_model (HITL's hook) under the engine: it writes
                # nothing (the tool seam pauses), so it is no news to a run's followers.
                continue
            await publish(str(node), update_data(update))
    if interrupts:
        return (
            {**latest, _INTERRUPT: interrupts}
            if isinstance(latest, dict)
            else {_INTERRUPT: interrupts}
        )
    return latest
