"""The values a run withholds from approvers, as a request made later in the run must mask them
(:mod:`approvals.masking`).

The requests of the run say which calls had which arguments redacted (their shown copies list
the paths), never the values; the values are in the run's own state, in the tool calls of the
model's messages. Nothing is stored twice: they are read from the thread's checkpoint when a
request is recorded, and only when an earlier request of the run redacted something.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from approvals.identity import Unreadable
from approvals.ports import ApprovalRequests
from approvals.redaction import redacted_paths, withheld


async def redacted_calls(requests: ApprovalRequests, run_id: str) -> dict[str, list[str]]:
    """The argument paths the run's requests redact, by call id (the calls that have any)."""
    found: dict[str, list[str]] = {}
    for request in await requests.for_run(run_id):
        if isinstance(request.shown, Unreadable):
            continue
        for path in redacted_paths(request.shown):
            paths = found.setdefault(request.call_id, [])
            if path not in paths:
                paths.append(path)
    return found


def _tool_calls(message: Any) -> Iterator[tuple[Any, Any]]:
    """(call id, arguments) of each tool call a stored message makes (a message object, or
    one written as a mapping)."""
    calls = (
        message.get("tool_calls")
        if isinstance(message, Mapping)
        else getattr(message, "tool_calls", None)
    )
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, Mapping):
            yield call.get("id"), call.get("args")


async def earlier_withheld(
    requests: ApprovalRequests,
    checkpointer: BaseCheckpointSaver[str],
    run_id: str,
    thread_id: str,
) -> list[Any]:
    """The values the run's requests withheld so far, read from the tool calls in the thread's
    state. Limit: only the thread's top-level state is read (a governed call in a subgraph
    keeps its messages in the subgraph's own), and a host with no LangGraph checkpoint (the
    OpenAI host) gives none; each request still hides its own call's values."""
    redacted = await redacted_calls(requests, run_id)
    if not redacted:
        return []
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    saved = await checkpointer.aget_tuple(config)  # type: ignore[arg-type]
    if saved is None:
        return []
    channels = saved.checkpoint.get("channel_values") or {}
    messages = channels.get("messages") if isinstance(channels, Mapping) else None
    values: list[Any] = []
    for message in messages if isinstance(messages, list) else []:
        for call_id, args in _tool_calls(message):
            paths = redacted.get(call_id) if isinstance(call_id, str) else None
            if paths and isinstance(args, dict):
                values.extend(withheld(args, paths))
    return values
