"""A run's input, checked before anything is written (the run's row, a checkpoint).

A graph takes ``{"message": "..."}`` (``parse_input``); a graph that takes its own input (a
``create_agent`` agent) takes its new user message beside its other input keys, ``context`` and
``configurable`` (``parse_graph_input``). ``InvalidRunInput`` says what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from approvals.errors import InvalidRunInput

MAX_MESSAGE_LENGTH = 20_000


@dataclass(frozen=True, kw_only=True, slots=True)
class GraphInput:
    """A host graph's run input: the message ``input`` governs, the graph's other input keys,
    and what its invocations get beside the state."""

    message: str
    state: dict[str, Any]
    #: For the graph's ``context_schema``.
    context: dict[str, Any] | None = None
    #: The caller's ``configurable`` values (the engine's own keys cannot be set).
    configurable: dict[str, Any] | None = None

    def kept(self) -> dict[str, Any]:
        """What the run's row keeps besides the message: what a resume passes again."""
        out: dict[str, Any] = {}
        if self.context is not None:
            out["context"] = self.context
        if self.configurable:
            out["configurable"] = self.configurable
        return out


#: ``configurable`` keys a caller cannot set: the thread, LangGraph's and the engine's own.
_RESERVED_PREFIXES = ("__", "approvals_", "checkpoint_")
_RESERVED_KEYS = frozenset({"thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map"})


def parse_graph_input(value: Any, fields: tuple[str, ...], *, takes_context: bool) -> GraphInput:
    """The input of a graph that takes its own input (a ``create_agent`` agent): its new user
    message, as ``{"messages": [{"role": "user", "content": "..."}]}`` (one message: the one
    ``input`` governs) or ``{"message": "..."}``; the graph's other input keys (``fields``),
    passed on as they are; ``context`` (when the graph has a ``context_schema``) and
    ``configurable``, given to each of its invocations. Anything else is refused, naming what
    the graph takes."""
    if not isinstance(value, dict):
        raise InvalidRunInput('input must be a JSON object like {"messages": [...]}')
    context = value.get("context")
    if "context" in value and (not takes_context or not isinstance(context, dict)):
        raise InvalidRunInput(
            '"context" must be an object, for a graph with a context_schema'
            if takes_context
            else "this graph has no context_schema: it takes no context"
        )
    configurable = value.get("configurable")
    if "configurable" in value:
        if not isinstance(configurable, dict):
            raise InvalidRunInput('"configurable" must be an object')
        reserved = sorted(
            k for k in configurable if k in _RESERVED_KEYS or k.startswith(_RESERVED_PREFIXES)
        )
        if reserved:
            raise InvalidRunInput(f"configurable key(s) the engine sets: {', '.join(reserved)}")
    own = ("message", "messages", "context", "configurable")
    rest = {k: v for k, v in value.items() if k not in own}
    unknown = set(rest) - set(fields)
    if unknown:
        extra = ["context"] if takes_context else []
        takes = ", ".join(["message", "messages", *fields, *extra, "configurable"])
        raise InvalidRunInput(
            f"unknown input field(s): {', '.join(sorted(unknown))} (this graph takes {takes})"
        )
    if "messages" in value:
        if "message" in value:
            raise InvalidRunInput('give "message" or "messages", not both')
        messages = value["messages"]
        if not isinstance(messages, list) or len(messages) != 1:
            raise InvalidRunInput('"messages" must be a list holding the one new user message')
        item = messages[0]
        if isinstance(item, dict) and item.get("role", "user") in ("user", "human"):
            if set(item) - {"role", "content", "type"}:
                raise InvalidRunInput("a message has only role and content")
            item = item.get("content")
        if not isinstance(item, str):
            raise InvalidRunInput(
                'the message must be {"role": "user", "content": "..."} or a string'
            )
    else:
        item = value.get("message")
    return GraphInput(
        message=parse_input({"message": item}),
        state=rest,
        context=context,
        configurable=configurable,
    )


def parse_input(value: Any) -> str:
    """Run input is ``{"message": "..."}``."""
    if not isinstance(value, dict):
        raise InvalidRunInput('input must be a JSON object like {"message": "..."}')
    unknown = set(value) - {"message"}
    if unknown:
        raise InvalidRunInput(f"unknown input field(s): {', '.join(sorted(unknown))}")
    message = value.get("message")
    if not isinstance(message, str) or not message.strip():
        raise InvalidRunInput('"message" must be a non-empty string')
    if len(message) > MAX_MESSAGE_LENGTH:
        raise InvalidRunInput(f'"message" is longer than {MAX_MESSAGE_LENGTH} characters')
    return message
