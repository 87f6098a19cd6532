"""Graphs the starts-under-load tests run (tests/integration/test_starts_under_load.py): the
refund agent, whose every refund escalates, with an interceptor before the escalation that
waits at a gate the test opens, so that a test decides when a start's step goes on (and what
its pool holds by then). Registered like a user's graphs.

The gate is made of threading primitives, polled: the served app's engine runs on a loop of
its own, in another thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from agent_hooks import Verdict

from graphs.examples import refund
from graphs.examples.scripted import ScriptedChatModel
from graphs.hooks.governance import Governance
from graphs.hooks.interceptors import EscalateSensitiveTools
from graphs.hosts.langgraph.agent import AgentGraph, build_agent
from graphs.tool_call.deps import GraphDeps


class Gate:
    """Where the steps wait at ``pre_tool_call`` until the test opens it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._arrived = 0
        self._open = threading.Event()

    def reset(self) -> None:
        with self._lock:
            self._arrived = 0
        self._open.clear()

    @property
    def arrived(self) -> int:
        """How many steps reached the gate."""
        with self._lock:
            return self._arrived

    def open(self) -> None:
        self._open.set()

    async def pass_through(self) -> None:
        with self._lock:
            self._arrived += 1
        while not self._open.is_set():
            await asyncio.sleep(0.01)


GATE = Gate()


class WaitAtTheGate:
    """Allows everything; a refund (``pre_tool_call``), once the gate is open."""

    async def intercept(self, ctx: dict[str, Any], /) -> Verdict:
        call = ctx.get("tool_call") or {}
        if ctx.get("interception_point") == "pre_tool_call" and call.get("name") == "issue_refund":
            await GATE.pass_through()
        return Verdict.allow()


def _gated(deps: GraphDeps, name: str, timeout: float | None) -> AgentGraph:
    # An async interceptor: the engine's emitter awaits it (the kit's protocol types only a
    # synchronous one).
    gate: Any = WaitAtTheGate()
    governance = Governance(
        interceptors=[gate, EscalateSensitiveTools(["issue_refund"])],
        timeout=timeout,
    )
    return build_agent(
        name=name,
        model=ScriptedChatModel(refund.refund_script),
        tools=refund.refund_tools(deps),
        deps=deps,
        governance=governance,
    )


def gated(deps: GraphDeps) -> AgentGraph:
    """Each step waits at the gate for as long as it stays closed (no interceptor timeout)."""
    return _gated(deps, "gated", None)


def gated_briefly(deps: GraphDeps) -> AgentGraph:
    """The interceptors, and the approval slot, answer within 2 s (the emitter's bound): a
    request that waits longer for a pool connection times out."""
    return _gated(deps, "gated_briefly", 2.0)


GRAPHS = {
    "gated": "tests.integration.starts_under_load_graphs:gated",
    "gated_briefly": "tests.integration.starts_under_load_graphs:gated_briefly",
}
