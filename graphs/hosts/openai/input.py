"""A new OpenAI-SDK run's input: read (``{"message": ...}`` or the SDK's input items, and the
JSON of the user's context, ``"context"``) and admitted (``agent_startup``, ``input``) before
anything is written."""

from __future__ import annotations

import json
from typing import Any

from approvals.errors import InvalidRunInput
from graphs.hosts.openai.governed import GovernedAgent, reachable
from graphs.run.admission import emit_input, emit_startup

MAX_MESSAGE_LENGTH = 20_000
MAX_INPUT_ITEMS = 200
#: The longest context JSON a run takes (its text): it is kept on the run's row.
MAX_CONTEXT_LENGTH = 20_000


def parse_openai_input(value: Any) -> str | list[dict[str, Any]]:
    """An OpenAI-SDK run's input: ``{"message": "..."}``, or ``{"input": [...]}`` with the
    SDK's input items (Responses API items, e.g. ``{"role": "user", "content": "..."}``);
    either may come with ``"context"`` (``parse_context``)."""
    if not isinstance(value, dict):
        raise InvalidRunInput('input must be a JSON object like {"message": "..."}')
    unknown = set(value) - {"message", "input", "context"}
    if unknown:
        raise InvalidRunInput(
            f"unknown input field(s): {', '.join(sorted(unknown))} (this agent takes message "
            "or input, and context)"
        )
    if "message" in value and "input" in value:
        raise InvalidRunInput('give "message" or "input", not both')
    if "input" in value:
        items = value["input"]
        if (
            not isinstance(items, list)
            or not items
            or len(items) > MAX_INPUT_ITEMS
            or not all(isinstance(i, dict) for i in items)
        ):
            raise InvalidRunInput(
                f'"input" must be a list of 1 to {MAX_INPUT_ITEMS} input items (objects)'
            )
        if len(json.dumps(items)) > MAX_MESSAGE_LENGTH * 5:
            raise InvalidRunInput('"input" is too long')
        return items
    message = value.get("message")
    if not isinstance(message, str) or not message.strip():
        raise InvalidRunInput('"message" must be a non-empty string')
    if len(message) > MAX_MESSAGE_LENGTH:
        raise InvalidRunInput(f'"message" is longer than {MAX_MESSAGE_LENGTH} characters')
    return message


def parse_context(value: dict[str, Any], *, takes_context: bool) -> dict[str, Any] | None:
    """The input's ``"context"``: the JSON object the agent's context factory makes its
    tools' context from (``None`` when the input has none). An agent registered without a
    factory refuses one: its tools would never see it."""
    if "context" not in value:
        return None
    if not takes_context:
        raise InvalidRunInput(
            '"context" is given, but this agent takes none: register it with '
            "OpenAIAgent(agent, context=<a function of the context JSON object>)"
        )
    data = value["context"]
    if not isinstance(data, dict):
        raise InvalidRunInput('"context" must be a JSON object')
    try:
        text = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidRunInput(f'"context" must be plain JSON ({exc})') from exc
    if len(text) > MAX_CONTEXT_LENGTH:
        raise InvalidRunInput(f'"context" is longer than {MAX_CONTEXT_LENGTH} characters')
    # Kept as the JSON reads back: what a resume rebuilds the context from.
    plain: dict[str, Any] = json.loads(text)
    return plain


async def admit(session: Any, host: GovernedAgent, given: Any) -> tuple[Any, dict[str, Any] | None]:
    """``agent_startup`` and ``input`` for a new run: the input as admitted (a transform's
    rewrite), or why the run is blocked. The SDK cannot pause for its input, so an escalation
    here blocks the run (a deny to the emitter without a slot)."""
    tools = [t.name for agent in _agents(host) for t in agent.tools]
    stopped = await emit_startup(session, tools)
    if stopped is not None:
        return None, stopped
    content, stopped = await emit_input(session, given, None)
    if stopped is not None:
        return None, stopped
    if isinstance(given, str) and not isinstance(content, str):
        return None, {"point": "input", "reason": "transform", "message": "not a message"}
    if isinstance(given, list) and not (
        isinstance(content, list) and all(isinstance(i, dict) for i in content)
    ):
        return None, {"point": "input", "reason": "transform", "message": "not input items"}
    return content, None


def _agents(host: GovernedAgent) -> list[Any]:
    return list(reachable(host.agent))
