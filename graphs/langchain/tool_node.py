"""``GovernedToolNode``: LangGraph's ``ToolNode`` whose calls go through ``ApprovalMiddleware``'s
tool seam, and the registration that finds the middleware in a registered graph (its tools and
governance for listings and edit checks, and the runner's input admission)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import ToolCallRequest, ToolNode
from langgraph.pregel import Pregel

from approvals.policy import Policy, check_policies_tool_names
from graphs.hooks.governance import Governance
from graphs.langchain.host_state import HostInputGate, input_fields
from graphs.langchain.in_process import LocalApprovals, run_sync
from graphs.langchain.middleware import ApprovalMiddleware
from graphs.run.admission import register_gate
from graphs.tool_call.tools import ToolCatalog

__all__ = ["GovernedToolNode", "register_hosts"]


class GovernedToolNode(ToolNode):
    """A ``ToolNode`` (in any ``StateGraph``, or given to ``create_react_agent``) whose every
    call goes through the engine's tool step, as under ``ApprovalMiddleware``:
    ``interrupt_on``, ``policy``, ``governance`` and the in-process settings are the
    middleware's. It takes every ``ToolNode`` argument: ``handle_tool_errors`` and
    ``messages_key`` as ``ToolNode`` reads them, and a given ``wrap_tool_call`` /
    ``awrap_tool_call`` runs inside the governed step (around the tool itself, so a retry it
    makes is still one execution to the ledger). A call nothing gates runs exactly as in
    ``ToolNode``. Only the tool points are governed (a ``ToolNode`` sees no model call)."""

    def __init__(
        self,
        tools: Sequence[BaseTool | Callable[..., Any]],
        *,
        interrupt_on: Mapping[str, bool | Mapping[str, Any]] | None = None,
        policy: str | Path | Policy | None = None,
        governance: Governance | None = None,
        interrupt_mode: str = "per_call",
        local: LocalApprovals | None = None,
        resume_decisions: str = "accept",
        name: str = "tools",
        tags: list[str] | None = None,
        messages_key: str = "messages",
        wrap_tool_call: Callable[..., Any] | None = None,
        awrap_tool_call: Callable[..., Any] | None = None,
        **tool_node_options: Any,
    ) -> None:
        # A ToolNode has no after_model: every pause is per call, in the tool seam.
        if interrupt_mode != "per_call":
            raise ValueError('a GovernedToolNode pauses per call: interrupt_mode="per_call"')
        middleware = ApprovalMiddleware(
            interrupt_on=interrupt_on,
            policy=policy,
            governance=governance,
            interrupt_mode=interrupt_mode,
            local=local,
            resume_decisions=resume_decisions,
        )
        user_wrap, user_awrap = wrap_tool_call, awrap_tool_call

        def wrapped(request: ToolCallRequest, execute: Callable[..., Any]) -> Any:
            if user_wrap is None:
                return middleware.wrap_tool_call(request, execute)
            return middleware.wrap_tool_call(request, lambda r: user_wrap(r, execute))

        async def awrapped(request: ToolCallRequest, execute: Callable[..., Any]) -> Any:
            async def inner(r: ToolCallRequest) -> Any:
                if user_awrap is not None:
                    return await user_awrap(r, execute)
                if user_wrap is not None:
                    # ToolNode runs a sync-only wrapper on its async path with a sync execute.
                    return user_wrap(r, lambda again: run_sync(lambda: execute(again)))
                return await execute(r)

            return await middleware.awrap_tool_call(request, inner)

        super().__init__(
            tools,
            name=name,
            tags=tags,
            messages_key=messages_key,
            wrap_tool_call=wrapped,
            awrap_tool_call=awrapped,
            **tool_node_options,
        )
        middleware.pauses_for_input = False
        self.middleware = middleware
        #: The same tools as a plain ToolNode, for the calls nothing governs: they run
        #: exactly as there (its error handling, its wrappers), not through ours.
        self._plain = ToolNode(
            list(self.tools_by_name.values()),
            name=name,
            tags=tags,
            messages_key=messages_key,
            wrap_tool_call=wrap_tool_call,
            awrap_tool_call=awrap_tool_call,
            **tool_node_options,
        )

    def _ungoverned(self, call: Any, tool_runtime: Any) -> bool:
        request = ToolCallRequest(
            tool_call=call,
            tool=self.tools_by_name.get(call["name"]),
            state=tool_runtime.state,
            runtime=tool_runtime,
        )
        return self.middleware.runs_ungoverned(request)

    def _run_one(self, call: Any, input_type: Any, tool_runtime: Any) -> Any:
        if self._ungoverned(call, tool_runtime):
            return self._plain._run_one(call, input_type, tool_runtime)
        return super()._run_one(call, input_type, tool_runtime)

    async def _arun_one(self, call: Any, input_type: Any, tool_runtime: Any) -> Any:
        if self._ungoverned(call, tool_runtime):
            return await self._plain._arun_one(call, input_type, tool_runtime)
        return await super()._arun_one(call, input_type, tool_runtime)


def register_hosts(graph: Pregel[Any, Any, Any, Any], name: str, catalog: ToolCatalog) -> bool:
    """Find the ``ApprovalMiddleware`` agents in ``graph`` (and its subgraphs), register their
    tools and governance under ``name`` (what listings and edit checks read) and the runner's
    input admission for the top-level one; whether there was one."""
    found = False
    graphs = [
        graph,
        *(sub for _, sub in graph.get_subgraphs(recurse=True) if isinstance(sub, Pregel)),
    ]
    for g in graphs:
        for middleware in _middlewares_in(g):
            tools = [
                t
                for node in g.nodes.values()
                if isinstance(node.bound, ToolNode)
                for t in node.bound.tools_by_name.values()
            ]
            check_policies_tool_names(
                middleware.governance.interceptors, (t.name for t in tools), graph=name
            )
            catalog.register(name, middleware.catalog_tools(tools), middleware.governance)
            if not found:
                # The first one found (the top-level agent's, if it is one) governs the run's
                # input; a nested one too, since a message reaches no node ungoverned.
                register_gate(
                    graph,
                    HostInputGate(
                        graph=name,
                        governance=middleware.governance,
                        tools=tuple(sorted(t.name for t in tools)),
                        # Only a create_agent agent's before_agent can pause for an input.
                        nested=g is not graph or not middleware.pauses_for_input,
                        input_fields=input_fields(graph),
                        takes_context=getattr(graph, "context_schema", None) is not None,
                    ),
                )
            found = True
    return found


def _middlewares_in(graph: Pregel[Any, Any, Any, Any]) -> list[ApprovalMiddleware]:
    """The ``ApprovalMiddleware`` instances whose ``before_agent`` hook is a node of
    ``graph`` (``create_agent`` adds one per middleware that has the hook), and those of its
    ``GovernedToolNode``s."""
    found: list[ApprovalMiddleware] = []
    for node in graph.nodes.values():
        if isinstance(node.bound, GovernedToolNode) and node.bound.middleware not in found:
            found.append(node.bound.middleware)
        for attr in ("afunc", "func"):
            owner = getattr(getattr(node.bound, attr, None), "__self__", None)
            if isinstance(owner, ApprovalMiddleware) and owner not in found:
                found.append(owner)
    return found
