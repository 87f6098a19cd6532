"""MCP servers of a hosted OpenAI-SDK agent: their tools governed like function tools, their
connections opened for one run step and closed when it ends (a pause ends it).

The SDK makes an agent's MCP tools anew each time it lists them (``Agent.get_mcp_tools``, at
every turn): ``FunctionTool``\\ s whose ``needs_approval`` is what the server's
``require_approval`` says for the tool (``"always"``, ``"never"``, per tool, or a function).
``govern_mcp`` wraps the agent's listing, so every tool it returns is governed in place before
the SDK sees it: ``pre_tool_call`` through the run's policies, ``require_approval`` as the
tool's own ``needs_approval`` (an escalation, like a function tool's), the decision read from
the database, and one execution through the ledger.

A server object belongs to the agent, which the registry keeps for every run of the process:
``connected`` opens it for one run step at a time (another run's step waits for it) and closes
it afterwards, so no step finds a connection another step closed, and no paused run holds one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from typing import Any
from weakref import WeakKeyDictionary

from agents import Agent, FunctionTool

from graphs.hosts.openai.calls import GovernedInvoke, govern_tool

#: The marker an agent whose MCP listing is governed carries.
_GOVERNED = "_approvals_mcp_governed"

#: One lock per server object: a server is connected for one run step at a time.
_LOCKS: WeakKeyDictionary[Any, asyncio.Lock] = WeakKeyDictionary()
#: The servers (by ``id``) the current step holds connected.
_HELD: ContextVar[frozenset[int]] = ContextVar("approvals_mcp_held", default=frozenset())


def govern_mcp(agent: Agent[Any]) -> None:
    """Govern every tool ``agent``'s MCP servers give, each time the SDK lists them."""
    if not agent.mcp_servers or getattr(agent, _GOVERNED, False):
        return
    listed = agent.get_mcp_tools

    async def governed_mcp_tools(run_context: Any) -> list[Any]:
        tools = await listed(run_context)
        for tool in tools:
            if isinstance(tool, FunctionTool) and not isinstance(
                tool.on_invoke_tool, GovernedInvoke
            ):
                govern_tool(tool)
        return tools

    # An instance attribute: ``Agent.get_all_tools`` asks ``self.get_mcp_tools``.
    object.__setattr__(agent, "get_mcp_tools", governed_mcp_tools)
    object.__setattr__(agent, _GOVERNED, True)


def servers(agents: Iterable[Agent[Any]]) -> list[Any]:
    """The MCP servers of ``agents``, each once."""
    found: dict[int, Any] = {}
    for agent in agents:
        for server in agent.mcp_servers:
            found.setdefault(id(server), server)
    return list(found.values())


@asynccontextmanager
async def connected(agents: Iterable[Agent[Any]]) -> AsyncIterator[None]:
    """Every MCP server of ``agents`` connected while the block runs (one step of one run),
    and cleaned up when it ends, however it ends. Inside such a block, the servers it holds
    are not connected again."""
    held = _HELD.get()
    wanted = [s for s in servers(agents) if id(s) not in held]
    if not wanted:
        # None, or all held already by this step (a resume reads its state, then runs it).
        yield
        return
    async with AsyncExitStack() as stack:
        # In a stable order, so that two steps wanting the same servers never hold one each.
        for server in sorted(wanted, key=id):
            lock = _LOCKS.setdefault(server, asyncio.Lock())
            await stack.enter_async_context(lock)
            await server.connect()
            stack.push_async_callback(server.cleanup)
        token = _HELD.set(held | {id(s) for s in wanted})
        try:
            yield
        finally:
            _HELD.reset(token)
