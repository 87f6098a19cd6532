"""Graphs by name. Entries are ``name = "module:attr"``; ``attr`` builds a compiled graph from
``GraphDeps``. The two examples are registered by default; configuration adds or overrides."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from langgraph.pregel import Pregel

from approvals.errors import GraphLoadError, GraphNotFound
from graphs.deps import GraphDeps
from graphs.governance import Governance
from graphs.tools import GovernedTool

DEFAULT_GRAPHS: dict[str, str] = {
    "refund": "graphs.examples.refund:build",
    "email": "graphs.examples.email:build",
}

GraphFactory = Callable[[GraphDeps], Pregel[Any, Any, Any, Any]]


class GraphRegistry:
    def __init__(self, deps: GraphDeps, entries: Mapping[str, str] | None = None) -> None:
        self._deps = deps
        self._entries = {**DEFAULT_GRAPHS, **(entries or {})}
        self._built: dict[str, Pregel[Any, Any, Any, Any]] = {}

    def names(self) -> list[str]:
        return sorted(self._entries)

    def tools(self, name: str) -> list[GovernedTool]:
        """The governed tools of graph ``name`` (built if needed), with their validation.
        Empty for a graph not built with ``build_agent``."""
        self.get(name)
        return list(self._deps.catalog.for_graph(name))

    def governance(self, name: str) -> Governance | None:
        """How graph ``name``'s tool calls are governed (built if needed); ``None`` for a
        graph not built with ``build_agent``."""
        self.get(name)
        found = self._deps.catalog.governance_of(name)
        return found if isinstance(found, Governance) else None

    def get(self, name: str) -> Pregel[Any, Any, Any, Any]:
        """The compiled graph registered as ``name`` (built once per process)."""
        if name in self._built:
            return self._built[name]
        target = self._entries.get(name)
        if target is None:
            raise GraphNotFound(name, self.names())
        module_name, _, attr = target.partition(":")
        if not module_name or not attr:
            raise GraphLoadError(name, target, "expected 'module:attr'")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise GraphLoadError(name, target, str(exc)) from exc
        catalog = self._deps.catalog
        catalog.last_registered = None
        graph = factory(self._deps)
        built_as = catalog.last_registered
        if built_as is not None and built_as != name:
            # An entry may build an agent under another name (several entries, one builder):
            # its tools and governance are found under the entry's name too.
            catalog.alias(name, built_as)
        if not isinstance(graph, Pregel):
            raise GraphLoadError(
                name, target, f"built {type(graph).__name__}, not a compiled graph"
            )
        if graph.checkpointer is not self._deps.checkpointer:
            raise GraphLoadError(name, target, "the graph must be compiled with deps.checkpointer")
        self._built[name] = graph
        return graph
