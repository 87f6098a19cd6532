"""What a registry entry built, as an OpenAI Agents SDK host: an ``agents.Agent``, or an
``OpenAIAgent`` (an agent with its policy files). Such an object exists only once the SDK was
imported, so a process that never imports it does not import it here."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from approvals.errors import GraphLoadError
from graphs.tool_call.deps import GraphDeps

if TYPE_CHECKING:
    from graphs.hosts.openai.host import OpenAIHost


def host_for(name: str, target: str, built: Any, deps: GraphDeps) -> OpenAIHost | None:
    """``built`` (what entry ``name = "target"`` built) as an OpenAI-SDK host, if it is an
    ``agents.Agent`` or an ``OpenAIAgent``; an agent with a tool the engine cannot govern is
    refused with ``GraphLoadError``."""
    if "agents" not in sys.modules:
        return None
    # Function-local: the SDK takes about 1.4 s to import (see this module's docstring).
    from agents import Agent

    from graphs.hosts.openai.governed import OpenAIAgent, UngovernedAgent
    from graphs.hosts.openai.host import OpenAIHost

    if not isinstance(built, Agent | OpenAIAgent):
        return None
    try:
        return OpenAIHost(name, built)
    except UngovernedAgent as exc:
        raise GraphLoadError(name, target, str(exc)) from exc
