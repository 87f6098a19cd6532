"""The OpenAI Agents SDK host: an ``agents.Agent`` registered like a graph, paused with the
SDK's ``needs_approval``, its ``RunState`` kept server-side, resumed through the same queue,
thread lock and decision records as LangGraph runs (see docs/openai-agents.md).

The host's classes import the SDK (the ``approvals-engine[openai]`` extra) when first named; the
state store's port (``OPENAI_STATES``, ``openai_extras``) does not, so the engine gives every
host the store without importing the SDK (about 1.4 s) where no SDK agent runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from graphs.hosts.openai.ports import OPENAI_STATES, OpenAIRunStates, openai_extras

if TYPE_CHECKING:
    from graphs.hosts.openai.calls import current_call
    from graphs.hosts.openai.governed import OpenAIAgent
    from graphs.hosts.openai.host import OpenAIHost

#: The names this package takes from ``governed``, ``host`` and ``calls`` (and so from the SDK)
#: when first asked for, by the module that holds each.
_LAZY = {
    "OpenAIAgent": "graphs.hosts.openai.governed",
    "OpenAIHost": "graphs.hosts.openai.host",
    "current_call": "graphs.hosts.openai.calls",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "OPENAI_STATES",
    "OpenAIAgent",
    "OpenAIHost",
    "OpenAIRunStates",
    "current_call",
    "openai_extras",
]
