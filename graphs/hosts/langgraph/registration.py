"""What a registry entry built, as a LangGraph host: a compiled graph, a ``StateGraph`` builder,
or a factory of either, compiled with the engine's checkpointer, its tools and governance in
the catalog. A graph must have an approval boundary (``build_agent``, ``ApprovalMiddleware`` in
a ``create_agent`` agent, a ``GovernedToolNode``) unless it is marked ``ungoverned``."""

from __future__ import annotations

import sys
import weakref
from typing import Any, TypeVar

from langgraph.graph import StateGraph
from langgraph.pregel import Pregel

from approvals.errors import GraphLoadError
from graphs.hosts.langgraph.host import LangGraphHost
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.tools import ToolCatalog

G = TypeVar("G", bound=Pregel[Any, Any, Any, Any])

_UNGOVERNED: weakref.WeakSet[Pregel[Any, Any, Any, Any]] = weakref.WeakSet()


def ungoverned(graph: G) -> G:
    """Mark ``graph`` as one the registry may run without any approval boundary (its tools run
    unapproved and unrecorded). Registering such a graph unmarked is refused."""
    _UNGOVERNED.add(graph)
    return graph


def host_for(name: str, target: str, built: Any, deps: GraphDeps) -> LangGraphHost:
    """``built`` (what entry ``name = "target"`` built) as a LangGraph host; refused with
    ``GraphLoadError`` when it is no graph, or one with no approval boundary. The registry
    asks this framework last: it takes whatever the others did not."""
    catalog = deps.catalog
    graph = _compiled(name, target, built, deps)
    built_as = catalog.last_registered
    if built_as is not None and built_as != name:
        # An entry may build an agent under another name (several entries, one
        # builder): its tools and governance are found under the entry's name too.
        catalog.alias(name, built_as)
    hosted = _register_hosts(graph, name, catalog)
    if built_as is None and not hosted and graph not in _UNGOVERNED:
        # A graph nothing in which asks a human or records an execution would run every
        # tool, however sensitive, with no approval and no warning.
        raise GraphLoadError(
            name,
            target,
            "the graph has no approval boundary, so its tools would run unapproved: add "
            "graphs.ApprovalMiddleware(interrupt_on={...}) to its create_agent middleware "
            "(or build it with graphs.hosts.langgraph.agent.build_agent), or mark it "
            "graphs.hosts.registry.ungoverned(graph) to run it without approvals",
        )
    return LangGraphHost(name, graph, catalog)


def _compiled(name: str, target: str, found: Any, deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """The graph an entry names: a compiled graph, a ``StateGraph`` builder, or a factory
    of either taking ``GraphDeps``. A graph compiled without a checkpointer gets the
    engine's, as the LangGraph server gives one; another checkpointer is refused (its
    pauses would not be where the engine resumes them)."""
    built = found
    if not isinstance(found, Pregel | StateGraph) and callable(found):
        built = found(deps)
    if isinstance(built, StateGraph):
        built = built.compile(checkpointer=deps.checkpointer)
    if not isinstance(built, Pregel):
        raise GraphLoadError(name, target, f"built {type(built).__name__}, not a compiled graph")
    if built.checkpointer is None:
        marked = built in _UNGOVERNED
        built = built.copy(update={"checkpointer": deps.checkpointer})
        if marked:
            _UNGOVERNED.add(built)
    if built.checkpointer is not deps.checkpointer:
        raise GraphLoadError(
            name,
            target,
            "the graph must be compiled with deps.checkpointer, or with no checkpointer "
            "(the engine attaches its own)",
        )
    return built


def _register_hosts(graph: Pregel[Any, Any, Any, Any], name: str, catalog: ToolCatalog) -> bool:
    """Register the tools and governance of the ``ApprovalMiddleware`` agents in ``graph``;
    whether there was one. A graph can hold one only if ``graphs.langchain.middleware`` was
    imported, so a process that never imports langchain does not start to here."""
    if "graphs.langchain.middleware" not in sys.modules:
        return False
    from graphs.langchain.tool_node import register_hosts

    found: bool = register_hosts(graph, name, catalog)
    return found
