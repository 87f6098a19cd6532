"""Agents by name, each behind its framework's host (``graphs.hosts.base.AgentHost``).

Entries are ``name = "module:attr"``; ``attr`` is what an agent framework hosts (a compiled
LangGraph graph or a ``StateGraph`` builder, an OpenAI Agents SDK agent), or builds one from
``GraphDeps`` (``def build(deps)``, or ``async def build(deps)``, awaited by
``GraphRegistry.load``, for one that loads its tools with ``await client.get_tools()``). Each
framework in ``FRAMEWORKS`` is asked in turn whether what an entry built is one of its agents.
A graph must have an approval boundary (``build_agent``, or ``ApprovalMiddleware`` in a
``create_agent`` agent) unless it is marked ``ungoverned``, and every policy rule that names a
tool must name one of the tools its agent has (``approvals.policy.check_tool_names``; the hosts
check it as they register an agent's tools). The two examples are registered by default;
configuration adds or overrides."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.util
import inspect
import json
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from langgraph.graph import StateGraph
from langgraph.pregel import Pregel

from approvals.errors import GraphLoadError, GraphNotFound
from approvals.policy import PolicyError
from graphs.hooks.governance import Governance
from graphs.hosts.base import AgentHost, HostFor
from graphs.hosts.langgraph import registration as langgraph
from graphs.hosts.langgraph.host import LangGraphHost

# Marks a graph to run without approvals: named here, where the registry's error says to find it.
from graphs.hosts.langgraph.registration import ungoverned as ungoverned
from graphs.hosts.openai import registration as openai
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.tools import GovernedTool

#: The agent frameworks, in the order they are asked about what an entry built. LangGraph's
#: comes last: it takes whatever the others did not (and refuses what is no graph).
FRAMEWORKS: tuple[HostFor, ...] = (openai.host_for, langgraph.host_for)

#: The example agents: registered by ``approvals demo``, and where the configuration asks for
#: them (``APPROVALS_EXAMPLES=true``), never by default in a company's registry.
EXAMPLE_GRAPHS: dict[str, str] = {
    "refund": "graphs.examples.refund:build",
    "email": "graphs.examples.email:build",
}
if importlib.util.find_spec("agents") is not None:
    # The OpenAI Agents SDK example, where the SDK is installed (the [openai] extra).
    EXAMPLE_GRAPHS["refund_openai"] = "graphs.examples.openai_refund:build"

GraphFactory = Callable[
    [GraphDeps], Pregel[Any, Any, Any, Any] | Awaitable[Pregel[Any, Any, Any, Any]]
]

_ASYNC_NOT_LOADED = (
    "an async factory builds it, so it is built by awaiting GraphRegistry.load(name) first "
    "(the engine does before each use)"
)


class GraphRegistry:
    def __init__(self, deps: GraphDeps, entries: Mapping[str, str] | None = None) -> None:
        self._deps = deps
        self._entries = dict(entries or {})
        self._hosts: dict[str, AgentHost] = {}
        self._loading = asyncio.Lock()

    @property
    def deps(self) -> GraphDeps:
        """What the registered graphs are built with (and host graphs find in their config)."""
        return self._deps

    def names(self) -> list[str]:
        return sorted(self._entries)

    def entries(self) -> dict[str, str]:
        """Each registered name and the ``module:attr`` that builds it."""
        return dict(sorted(self._entries.items()))

    def config_digest(self) -> str:
        """A digest of the registration (names and targets): processes that report the same
        one build the same graphs from the same code paths."""
        text = json.dumps(self.entries(), separators=(",", ":"))
        return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def loaded(self) -> list[str]:
        """The registered graphs built in this process so far."""
        return sorted(self._hosts)

    def host(self, name: str) -> AgentHost:
        """The host of the agent registered as ``name`` (built once per process)."""
        found = self._hosts.get(name)
        return found if found is not None else self._load(name)

    def tools(self, name: str) -> list[GovernedTool]:
        """The governed tools of graph ``name`` (built if needed), with their validation.
        Empty for a graph not built with ``build_agent``, and for an OpenAI-SDK agent, whose
        tools take no edits (``describe_tools`` lists them)."""
        return self.host(name).tools()

    def describe_tools(self, name: str) -> list[dict[str, Any]]:
        """The tools of graph ``name`` as ``approvals tools list`` shows them: a LangGraph
        graph's governed tools with their validation, an OpenAI-SDK agent's function tools
        (those of its nested and handoff agents too) with their argument schema and whether
        they need approval."""
        return self.host(name).describe_tools()

    def governance(self, name: str) -> Governance | None:
        """How graph ``name``'s tool calls are governed (built if needed); ``None`` for a
        graph not built with ``build_agent``, and for an OpenAI-SDK agent (its requests take
        no edits, so there is nothing to check one against)."""
        return self.host(name).edit_governance()

    def get(self, name: str) -> Pregel[Any, Any, Any, Any]:
        """The compiled graph registered as ``name`` (built once per process)."""
        host = self.host(name)
        if not isinstance(host, LangGraphHost):
            raise GraphLoadError(name, self._entries[name], f"{host.kind}, not a LangGraph graph")
        return host.graph

    async def load(self, name: str) -> AgentHost:
        """Build graph ``name`` now, if it is not built yet, awaiting its factory when that is
        an ``async def`` (one that loads its tools with ``await client.get_tools()``); its
        host. The other accessors then return it; for a graph an async factory builds they
        refuse until it is loaded, since they cannot wait. The engine loads a graph before
        each use."""
        found = self._hosts.get(name)
        if found is not None:
            return found
        async with self._loading:
            # One build at a time: the catalog's last registration is how a build's agent is
            # found, and another build must not register in between.
            found = self._hosts.get(name)
            if found is not None:
                return found
            target, factory = self._factory(name)
            catalog = self._deps.catalog
            catalog.last_registered = None
            try:
                built = _called(factory, self._deps)
                if inspect.isawaitable(built):
                    built = await built
                return self._register(name, target, built)
            except PolicyError as exc:
                raise GraphLoadError(name, target, str(exc)) from exc

    def _load(self, name: str) -> AgentHost:
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

    def _register(self, name: str, target: str, built: Any) -> AgentHost:
        """Keep what an entry built as the host of the first framework that takes it. Each
        host refuses a policy rule that names none of its agent's tools (it could never
        apply: a typo in it would let the calls it was written for through):
        ``PolicyError``."""
        for host_for in FRAMEWORKS:
            host = host_for(name, target, built, self._deps)
            if host is not None:
                self._hosts[name] = host
                return host
        raise GraphLoadError(
            name, target, f"built {type(built).__name__}, which no agent framework hosts"
        )


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
