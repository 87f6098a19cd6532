"""The OpenAI Agents SDK host: an ``agents.Agent`` registered like a graph, paused with the
SDK's ``needs_approval``, its ``RunState`` kept server-side, resumed through the same queue,
thread lock and decision records as LangGraph runs (see docs/openai-agents.md).

Importing this package imports the SDK (the ``approvals[openai]`` extra)."""

from graphs.openai_host.host import OpenAIAgent, OpenAIHost, current_call
from graphs.openai_host.ports import OPENAI_STATES, OpenAIRunStates, openai_extras

__all__ = [
    "OPENAI_STATES",
    "OpenAIAgent",
    "OpenAIHost",
    "OpenAIRunStates",
    "current_call",
    "openai_extras",
]
