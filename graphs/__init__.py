"""The agent side of the engine, grouped by concern (docs/architecture.md has the map).

What an application imports is named here, and loaded on first use: importing langchain takes
seconds, and most commands that import this package never need it.

- ``ApprovalMiddleware``: the ``create_agent`` middleware (HumanInTheLoopMiddleware's superset);
  ``GovernedToolNode``: LangGraph's ``ToolNode`` whose calls go through it.
- ``build_agent``, ``AgentGraph``: the engine's own governed LangGraph loop.
- ``governed_tool``, ``GovernedTool``, ``ToolCall``, ``precondition``, ``postcondition``: tools.
- ``GraphDeps``, ``Extra``: what a registered graph's builder is given.
- ``Governance``: the AGENT-HOOKS-0.1 interceptors and policy a run is governed by.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphs.hooks.governance import Governance
    from graphs.hosts.langgraph.agent import AgentGraph, build_agent
    from graphs.langchain.middleware import ApprovalMiddleware
    from graphs.langchain.tool_node import GovernedToolNode
    from graphs.tool_call.call import ToolCall, postcondition, precondition
    from graphs.tool_call.deps import Extra, GraphDeps
    from graphs.tool_call.tools import GovernedTool, governed_tool

_HOME = {
    "ApprovalMiddleware": "graphs.langchain.middleware",
    "GovernedToolNode": "graphs.langchain.tool_node",
    "build_agent": "graphs.hosts.langgraph.agent",
    "AgentGraph": "graphs.hosts.langgraph.agent",
    "governed_tool": "graphs.tool_call.tools",
    "GovernedTool": "graphs.tool_call.tools",
    "ToolCall": "graphs.tool_call.call",
    "precondition": "graphs.tool_call.call",
    "postcondition": "graphs.tool_call.call",
    "GraphDeps": "graphs.tool_call.deps",
    "Extra": "graphs.tool_call.deps",
    "Governance": "graphs.hooks.governance",
}

__all__ = [
    "AgentGraph",
    "ApprovalMiddleware",
    "Extra",
    "Governance",
    "GovernedTool",
    "GovernedToolNode",
    "GraphDeps",
    "ToolCall",
    "build_agent",
    "governed_tool",
    "postcondition",
    "precondition",
]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'graphs' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
