"""Graphs by name. Entries are ``name = "module:attr"``; ``attr`` is a compiled graph, a
``StateGraph`` builder, or builds either from ``GraphDeps`` (``def build(deps)``, or ``async def
build(deps)``, awaited by ``GraphRegistry.load``, for one that loads its tools with ``await
client.get_tools()``). A graph must have an approval
boundary (``build_agent``, or ``ApprovalMiddleware`` in a ``create_agent`` agent) unless it is
marked ``ungoverned``, and every policy rule that names a tool must name one of the tools its
agent has (``approvals.policy.check_tool_names``; the hosts check it as they register an
agent's tools). The two examples are registered by default; configuration adds or overrides."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.util
import inspect
import sys
import weakref
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from langgraph.graph import StateGraph
from langgraph.pregel import Pregel

from approvals.errors import GraphLoadError, GraphNotFound
from approvals.policy import PolicyError
from graphs.hooks.governance import Governance
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.tools import GovernedTool, ToolCatalog

if TYPE_CHECKING:
    from graphs.hosts.openai import OpenAIHost

DEFAULT_GRAPHS: dict[str, str] = {
    "refund": "graphs.examples.refund:build",
    "email": "graphs.examples.email:build",
}
if importlib.util.find_spec("agents") is not None:
    # The OpenAI Agents SDK example, where the SDK is installed (the approvals[openai] extra).
    DEFAULT_GRAPHS["refund_openai"] = "graphs.examples.openai_refund:build"

GraphFactory = Callable[
    [GraphDeps], Pregel[Any, Any, Any, Any] | Awaitable[Pregel[Any, Any, Any, Any]]
]
G = TypeVar("G", bound=Pregel[Any, Any, Any, Any])

_ASYNC_NOT_LOADED = (
    "an async factory builds it, so it is built by awaiting GraphRegistry.load(name) first "
    "(the engine does before each use)"
)


class GraphRegistry:
    def __init__(self, deps: GraphDeps, entries: Mapping[str, str] | None = None) -> None:
        self._deps = deps
        self._entries = {**DEFAULT_GRAPHS, **(entries or {})}
        self._built: dict[str, Pregel[Any, Any, Any, Any]] = {}
        self._openai: dict[str, OpenAIHost] = {}
        self._loading = asyncio.Lock()

    @property
    def deps(self) -> GraphDeps:
        """What the registered graphs are built with (and host graphs find in their config)."""
        return self._deps

    def names(self) -> list[str]:
        return sorted(self._entries)

    def tools(self, name: str) -> list[GovernedTool]:
        """The governed tools of graph ``name`` (built if needed), with their validation.
        Empty for a graph not built with ``build_agent``, and for an OpenAI-SDK agent, whose
        tools take no edits (``describe_tools`` lists them)."""
        if self.openai(name) is not None:
            return []
        self.get(name)
        return list(self._deps.catalog.for_graph(name))

    def describe_tools(self, name: str) -> list[dict[str, Any]]:
        """The tools of graph ``name`` as ``approvals tools list`` shows them: a LangGraph
        graph's governed tools with their validation, an OpenAI-SDK agent's function tools
        (those of its nested and handoff agents too) with their argument schema and whether
        they need approval."""
        host = self.openai(name)
        if host is not None:
            return host.describe_tools()
        return [t.describe() for t in self.tools(name)]

    def governance(self, name: str) -> Governance | None:
        """How graph ``name``'s tool calls are governed (built if needed); ``None`` for a
        graph not built with ``build_agent``, and for an OpenAI-SDK agent (its requests take
        no edits, so there is nothing to check one against)."""
        if self.openai(name) is not None:
            return None
        self.get(name)
        found = self._deps.catalog.governance_of(name)
        return found if isinstance(found, Governance) else None

    def get(self, name: str) -> Pregel[Any, Any, Any, Any]:
        """The compiled graph registered as ``name`` (built once per process)."""
        if name in self._built:
            return self._built[name]
        loaded = self._load(name)
        if not isinstance(loaded, Pregel):
            raise GraphLoadError(
                name, self._entries[name], "an OpenAI Agents SDK agent, not a LangGraph graph"
            )
        return loaded

    def openai(self, name: str) -> OpenAIHost | None:
        """The OpenAI Agents SDK agent registered as ``name`` (its tools governed), or
        ``None`` when ``name`` is a LangGraph graph. An entry may name an ``agents.Agent``, a
        ``graphs.hosts.openai.OpenAIAgent`` (an agent with its policy files), or build either
        from ``GraphDeps``."""
        if name in self._built:
            return None
        loaded = self._load(name)
        return None if isinstance(loaded, Pregel) else loaded

    async def load(self, name: str) -> None:
        """Build graph ``name`` now, if it is not built yet, awaiting its factory when that is
        an ``async def`` (one that loads its tools with ``await client.get_tools()``). The
        other accessors then return it; for a graph an async factory builds they refuse until
        it is loaded, since they cannot wait. The engine loads a graph before each use."""
        if name in self._built or name in self._openai:
            return
        async with self._loading:
            # One build at a time: the catalog's last registration is how a build's agent is
            # found, and another build must not register in between.
            if name in self._built or name in self._openai:
                return
            target, factory = self._factory(name)
            catalog = self._deps.catalog
            catalog.last_registered = None
            try:
                built = _called(factory, self._deps)
                if inspect.isawaitable(built):
                    built = await built
                self._register(name, target, built)
            except PolicyError as exc:
                raise GraphLoadError(name, target, str(exc)) from exc

    def _load(self, name: str) -> Pregel[Any, Any, Any, Any] | OpenAIHost:
        if name in self._openai:
            return self._openai[name]
        if name in self._built:
            return self._built[name]
        target, factory = self._factory(name)
        if inspect.iscoroutinefunction(factory):
            raise GraphLoadError(name, target, _ASYNC_NOT_LOADED)
        catalog = self._deps.catalog
        # A build awaiting its factory (``load``) reads the catalog's last registration once
        # its factory returns: this one, run meanwhile, leaves it as it found it.
        outer = catalog.last_registered
        catalog.last_registered = None
        try:
            built = _called(factory, self._deps)
            if inspect.isawaitable(built):
                if inspect.iscoroutine(built):
                    built.close()
                raise GraphLoadError(name, target, _ASYNC_NOT_LOADED)
            return self._register(name, target, built)
        except PolicyError as exc:
            raise GraphLoadError(name, target, str(exc)) from exc
        finally:
            catalog.last_registered = outer

    def _factory(self, name: str) -> tuple[str, Any]:
        """The entry of graph ``name`` and what it names (a graph, or a factory of one)."""
        target = self._entries.get(name)
        if target is None:
            raise GraphNotFound(name, self.names())
        module_name, _, attr = target.rpartition(":")
        if not module_name or not attr:
            raise GraphLoadError(name, target, "expected 'module:attr'")
        try:
            return target, getattr(_module(name, module_name), attr)
        except (ImportError, AttributeError, OSError) as exc:
            raise GraphLoadError(name, target, str(exc)) from exc

    def _register(
        self, name: str, target: str, built: Any
    ) -> Pregel[Any, Any, Any, Any] | OpenAIHost:
        """Keep what an entry built: an OpenAI-SDK agent as its host, a LangGraph graph
        compiled, with its tools and governance in the catalog. Each host refuses a policy
        rule that names none of its agent's tools (it could never apply: a typo in it would
        let the calls it was written for through): ``PolicyError``."""
        catalog = self._deps.catalog
        host = _openai_host(name, target, built)
        if host is not None:
            self._openai[name] = host
            return host
        graph = self._compiled(name, target, built)
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
        self._built[name] = graph
        return graph

    def _compiled(self, name: str, target: str, found: Any) -> Pregel[Any, Any, Any, Any]:
        """The graph an entry names: a compiled graph, a ``StateGraph`` builder, or a factory
        of either taking ``GraphDeps``. A graph compiled without a checkpointer gets the
        engine's, as the LangGraph server gives one; another checkpointer is refused (its
        pauses would not be where the engine resumes them)."""
        built = found
        if not isinstance(found, Pregel | StateGraph) and callable(found):
            built = found(self._deps)
        if isinstance(built, StateGraph):
            built = built.compile(checkpointer=self._deps.checkpointer)
        if not isinstance(built, Pregel):
            raise GraphLoadError(
                name, target, f"built {type(built).__name__}, not a compiled graph"
            )
        if built.checkpointer is None:
            ungoverned = built in _UNGOVERNED
            built = built.copy(update={"checkpointer": self._deps.checkpointer})
            if ungoverned:
                _UNGOVERNED.add(built)
        if built.checkpointer is not self._deps.checkpointer:
            raise GraphLoadError(
                name,
                target,
                "the graph must be compiled with deps.checkpointer, or with no checkpointer "
                "(the engine attaches its own)",
            )
        return built


def _called(found: Any, deps: GraphDeps) -> Any:
    """What an entry names, called with ``deps`` if it is a factory (a graph, a builder or an
    agent is taken as it is); an async factory's answer is still to be awaited."""
    if isinstance(found, Pregel | StateGraph) or not callable(found):
        return found
    return found(deps)


def _module(entry: str, location: str) -> Any:
    """The module an entry names: a module path, or a Python file (as ``langgraph.json``
    names graphs), loaded once under a name of its own."""
    if not location.endswith(".py"):
        return importlib.import_module(location)
    path = Path(location)
    module_name = f"approvals_graph_{hashlib.sha256(str(path).encode()).hexdigest()[:16]}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


_UNGOVERNED: weakref.WeakSet[Pregel[Any, Any, Any, Any]] = weakref.WeakSet()


def ungoverned(graph: G) -> G:
    """Mark ``graph`` as one the registry may run without any approval boundary (its tools run
    unapproved and unrecorded). Registering such a graph unmarked is refused."""
    _UNGOVERNED.add(graph)
    return graph


def _register_hosts(graph: Pregel[Any, Any, Any, Any], name: str, catalog: ToolCatalog) -> bool:
    """Register the tools and governance of the ``ApprovalMiddleware`` agents in ``graph``;
    whether there was one. A graph can hold one only if ``graphs.langchain.middleware`` was
    imported, so a process that never imports langchain does not start to here."""
    if "graphs.langchain.middleware" not in sys.modules:
        return False
    from graphs.langchain.tool_node import register_hosts

    found: bool = register_hosts(graph, name, catalog)
    return found


def _openai_host(name: str, target: str, built: Any) -> OpenAIHost | None:
    """``built`` as an OpenAI-SDK host, if it is an ``agents.Agent`` (or an ``OpenAIAgent``).
    Such an object exists only once the SDK was imported, so a process that never imports it
    does not import it here."""
    if "agents" not in sys.modules:
        return None
    from agents import Agent

    from graphs.hosts.openai import OpenAIAgent, OpenAIHost
    from graphs.hosts.openai.host import UngovernedAgent

    if not isinstance(built, Agent | OpenAIAgent):
        return None
    try:
        return OpenAIHost(name, built)
    except UngovernedAgent as exc:
        raise GraphLoadError(name, target, str(exc)) from exc
