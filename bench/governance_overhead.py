"""Governance overhead: one agent turn with 10 allowed tool calls, governed against plain.

    python bench/governance_overhead.py [--runs N] [--json]

* plain: LangGraph's ``create``-style loop: a model node and the prebuilt ``ToolNode`` running
  the 10 calls, routed by ``tools_condition``.
* governed: ``graphs.hosts.langgraph.agent.build_agent`` with 5 interceptors (allow-only, each
inspecting its
  context as a policy would), so every point is emitted: agent_startup, input, pre/post
  model_call twice, pre/post tool_call for each of the 10 calls, output, agent_shutdown. The
  turn runs as the runner runs it: its input admitted first (``agent_startup`` and ``input``
  through the run's session, ``graphs.run.admission``), then the graph.
* governed direct: the same graph invoked directly with a message nobody governed yet, so its
  ``start`` node emits ``agent_startup`` and ``input`` (one more checkpointed step: the path of
  an input that waits for a human, and of a graph invoked without the runner).

Both use LangGraph's in-memory checkpointer and the same scripted model and tool function,
run with ``durability="sync"`` on a fresh thread per turn, alternating, after a warm-up. The
governed loop's ledger (execute-once) uses in-memory ports here, so what is measured is the
governance layer and the loop's shape, not database round trips (``bench/approval_cycle.py``
measures those). Prints p50/p90 per variant (wall clock) and the p50 of the process's CPU time
per turn (steadier than the wall clock on a shared machine), and the ratio governed / plain of
each (target <= 1.5, issue 16; the long-term aim is 1.15).

* create_agent: langchain's ``create_agent`` with the same scripted model (as a LangChain chat
  model) and a plain ``@tool``, no middleware.
* middleware: the same ``create_agent`` agent with ``graphs.ApprovalMiddleware`` and the same 5
  interceptors, its input admitted as the runner admits it; ratio middleware / create_agent.

It also times the emitter on its own: the 28 contexts of one governed turn, captured, emitted
again through a bare emitter with the same 5 interceptors, and reports the cost per emission
(target <= 0.15 ms with 5 interceptors):

* emitter: ``graphs.hooks.emitter.HostEmitter`` (the engine's), the interceptors read-only as the
  policy engine declares itself;
* emitter copying: ``HostEmitter`` with interceptors that do not say they are read-only (each
  gets its own copy of the context, as the contract requires);
* emitter sdk: agent-hooks-sdk's ``InterceptionEmitter`` (``APPROVALS_EMITTER=sdk``).

``plain + emitter`` over ``plain`` is the ratio no host on that emitter can beat for this turn.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import json
import os
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from agent_hooks import InterceptionEmitter, Verdict
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from approvals.memory import MemoryToolLedger
from approvals.ports import ApprovalRequests, ToolLedger
from graphs import ApprovalMiddleware
from graphs.examples.effects import extras
from graphs.examples.scripted import ScriptedChatModel, ScriptedToolModel
from graphs.hooks.emitter import HostEmitter, JsonContext
from graphs.hooks.governance import Governance, SessionHolder
from graphs.hosts.langgraph.agent import build_agent
from graphs.langchain.tool_node import register_hosts
from graphs.run.admission import input_gate
from graphs.run.config import engine_configurable
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.tools import ToolCall, governed_tool

CALLS = 10
#: Governed / plain at p50 (issue 16).
TARGET = 1.5
#: Milliseconds per emission with 5 interceptors, through the engine's emitter (issue 16).
EMISSION_TARGET_MS = 0.15
INTERCEPTORS = 5


def script(messages: list[BaseMessage]) -> AIMessage:
    """Ten lookups, then an answer summing their results."""
    results = [m for m in messages if isinstance(m, ToolMessage)]
    if not results:
        return AIMessage(
            content="",
            tool_calls=[
                {"id": f"call-{i}", "name": "add", "args": {"a": i, "b": 2 * i}}
                for i in range(CALLS)
            ],
        )
    total = sum(json.loads(str(m.content))["sum"] for m in results)
    return AIMessage(content=f"The sums add up to {total}.")


def add_numbers(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


# -- the plain variant -------------------------------------------------------------------


def build_plain() -> Any:
    model = ScriptedChatModel(script)

    @tool
    def add(a: int, b: int) -> dict[str, int]:
        """Add two numbers."""
        return add_numbers(a, b)

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(list(state["messages"]))]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([add]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=InMemorySaver())


# -- the governed variant ----------------------------------------------------------------


class NoRequests:
    """Nothing escalates in this bench: asking for a request is a bug."""

    async def open(self, new: Any) -> Any:
        raise AssertionError("no call should escalate in this bench")

    async def get(self, request_id: str) -> Any:
        return None


class NoEffects:
    async def record(self, *, run_id: str, call_id: str, tool: str, args: Any) -> None:
        return None


class Recording:
    """Keeps a copy of every context it sees (to replay them through a bare emitter)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def intercept(self, ctx: dict[str, Any], /) -> Verdict:
        self.seen.append(ctx)
        return Verdict.allow()


class Inspecting:
    """An allow-only interceptor that reads its context the way a policy does, and says it
    only reads it, as the policy engine does (``context_read_only``)."""

    context_read_only = True

    def __init__(self, key: str) -> None:
        self.key = key

    def intercept(self, ctx: dict[str, Any], /) -> Verdict:
        call = ctx.get("tool_call")
        if isinstance(call, dict) and call.get("name") == self.key:
            return Verdict.deny(reason="never")
        return Verdict.allow()


def build_governed(*extra: Any) -> Any:
    @governed_tool()
    async def add(call: ToolCall, a: int, b: int) -> dict[str, int]:
        """Add two numbers."""
        return add_numbers(a, b)

    deps = GraphDeps(
        checkpointer=InMemorySaver(),
        requests=_as(ApprovalRequests, NoRequests()),
        ledger=_as(ToolLedger, MemoryToolLedger()),
        extras=extras(NoEffects()),
    )
    interceptors = [*extra, *(Inspecting(f"blocked_{i}") for i in range(5 - len(extra)))]
    governance = Governance(interceptors=interceptors)
    return build_agent(
        name="bench", model=ScriptedChatModel(script), tools=[add], deps=deps, governance=governance
    )


def _as(_kind: Any, value: Any) -> Any:
    return value


# -- the create_agent variants -------------------------------------------------------------


def build_create_agent(*, governed: bool) -> tuple[Any, GraphDeps]:
    """``create_agent`` as a user writes it; ``governed`` adds ``ApprovalMiddleware`` with the
    bench's 5 interceptors (nothing escalates)."""

    @tool
    def add(a: int, b: int) -> dict[str, int]:
        """Add two numbers."""
        return add_numbers(a, b)

    deps = GraphDeps(
        checkpointer=InMemorySaver(),
        requests=_as(ApprovalRequests, NoRequests()),
        ledger=_as(ToolLedger, MemoryToolLedger()),
        extras=extras(NoEffects()),
    )
    governance = Governance(interceptors=[Inspecting(f"blocked_{i}") for i in range(5)])
    middleware = [ApprovalMiddleware(governance=governance)] if governed else []
    graph = create_agent(
        ScriptedToolModel(script=script),
        tools=[add],
        middleware=middleware,
        checkpointer=deps.checkpointer,
    )
    if governed:
        register_hosts(graph, "bench-middleware", deps.catalog)
    return graph, deps


# -- measuring ---------------------------------------------------------------------------


async def plain_turn(graph: Any) -> None:
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    out = await graph.ainvoke(
        {"messages": [HumanMessage(content="add them")]}, config, durability="sync"
    )
    assert out["messages"][-1].content.startswith("The sums add up to")


async def governed_turn(graph: Any) -> None:
    """A turn as the runner runs it: the input admitted first, then the graph."""
    run_id = str(uuid.uuid4())
    holder = SessionHolder()
    gate = input_gate(graph)
    assert gate is not None
    admission = await gate.admit(holder, run_id=run_id, principal="bench", message="add them")
    assert admission.state is not None
    assert not admission.state["new_input"]
    config = {"configurable": {"thread_id": run_id, **holder.config()}}
    out = await graph.ainvoke(admission.state, config, durability="sync")
    assert out["messages"][-1].content.startswith("The sums add up to")
    assert holder.session is not None
    await holder.session.shutdown("completed")
    assert len(holder.session.records()) == 2 + 2 * 2 + 2 * CALLS + 2


async def governed_direct_turn(graph: Any) -> None:
    """The graph invoked directly: its ``start`` node governs the new message."""
    run_id = str(uuid.uuid4())
    holder = SessionHolder()
    config = {"configurable": {"thread_id": run_id, **holder.config()}}
    out = await graph.ainvoke(
        {
            "messages": [HumanMessage(content="add them")],
            "run_id": run_id,
            "started_by": "bench",
            "new_input": True,
            "blocked": None,
        },
        config,
        durability="sync",
    )
    assert out["messages"][-1].content.startswith("The sums add up to")
    assert holder.session is not None
    await holder.session.shutdown("completed")
    assert len(holder.session.records()) == 2 + 2 * 2 + 2 * CALLS + 2


async def middleware_turn(graph: Any, deps: GraphDeps) -> None:
    """A turn as the runner runs it: input admitted first, the run's bookkeeping in the
    config."""
    run_id = str(uuid.uuid4())
    holder = SessionHolder()
    gate = input_gate(graph)
    assert gate is not None
    admission = await gate.admit(holder, run_id=run_id, principal="bench", message="add them")
    assert admission.state is not None
    engine = engine_configurable(run_id=run_id, principal="bench", graph="bench", deps=deps)
    config = {"configurable": {"thread_id": run_id, **holder.config(), **engine}}
    out = await graph.ainvoke(admission.state, config, durability="sync")
    assert out["messages"][-1].content.startswith("The sums add up to")
    assert holder.session is not None
    await holder.session.shutdown("completed")
    assert len(holder.session.records()) == 2 + 2 * 2 + 2 * CALLS + 2


async def captured_contexts() -> list[dict[str, Any]]:
    """The contexts one governed turn emits, as the first interceptor received them."""
    recording = Recording()
    await governed_turn(build_governed(recording))
    return recording.seen


class Copying(Inspecting):
    """``Inspecting`` without the read-only declaration: the emitter copies its context."""

    context_read_only = False


class EmitterOnly:
    """Emit ``contexts`` through a bare emitter (``kind``) with the bench's 5 interceptors.

    ``prepare`` (not timed) builds the emitter and fresh copies of the contexts, as a host
    builds its contexts anyway; the timed call is the emissions alone."""

    def __init__(
        self,
        contexts: list[dict[str, Any]],
        kind: type[InterceptionEmitter],
        interceptor: type[Inspecting] = Inspecting,
    ) -> None:
        self._contexts = contexts
        self._kind = kind
        self._interceptor = interceptor
        self._emitter = kind()
        self._fresh: list[JsonContext] = []

    def prepare(self) -> None:
        self._emitter = self._kind()
        for i in range(INTERCEPTORS):
            self._emitter.register(self._interceptor(f"blocked_{i}"), name=f"Inspecting#{i}")
        self._fresh = [JsonContext(copy.deepcopy(ctx)) for ctx in self._contexts]

    async def __call__(self) -> None:
        for ctx in self._fresh:
            await self._emitter.emit_unchecked(ctx)


@asynccontextmanager
async def no_gc() -> AsyncIterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def timed(fn: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    """Wall-clock and process CPU seconds of one call."""
    prepare = getattr(fn, "prepare", None)
    if prepare is not None:
        prepare()
    start, cpu = time.perf_counter(), time.process_time()
    await fn()
    return time.perf_counter() - start, time.process_time() - cpu


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    plain, governed = build_plain(), build_governed()
    bare, _ = build_create_agent(governed=False)
    hosted, hosted_deps = build_create_agent(governed=True)
    contexts = await captured_contexts()
    copies = [copy.deepcopy(c) for c in contexts]
    variants: dict[str, Callable[[], Awaitable[None]]] = {
        "plain": lambda: plain_turn(plain),
        "governed": lambda: governed_turn(governed),
        "governed direct": lambda: governed_direct_turn(governed),
        "emitter": EmitterOnly(copies, HostEmitter),
        "emitter copying": EmitterOnly(copies, HostEmitter, Copying),
        "emitter sdk": EmitterOnly(copies, InterceptionEmitter),
        "create_agent": lambda: plain_turn(bare),
        "middleware": lambda: middleware_turn(hosted, hosted_deps),
    }
    for _ in range(30):  # warm-up
        for fn in variants.values():
            await timed(fn)
    times: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    async with no_gc():
        for i in range(args.runs):
            order = list(variants.items())
            if i % 2:
                order.reverse()
            for name, fn in order:
                wall, used = await timed(fn)
                times[name].append(wall)
                cpu[name].append(used)
    report: dict[str, Any] = {
        "calls_per_turn": CALLS,
        "interceptors": INTERCEPTORS,
        "runs": args.runs,
        "load_average": os.getloadavg(),
    }
    for name, values in times.items():
        q = statistics.quantiles(values, n=10)
        report[name] = {
            "p50_ms": statistics.median(values) * 1000,
            "p90_ms": q[8] * 1000,
            "cpu_p50_ms": statistics.median(cpu[name]) * 1000,
        }
    report["ratio_p50"] = report["governed"]["p50_ms"] / report["plain"]["p50_ms"]
    report["ratio_p90"] = report["governed"]["p90_ms"] / report["plain"]["p90_ms"]
    report["ratio_cpu_p50"] = report["governed"]["cpu_p50_ms"] / report["plain"]["cpu_p50_ms"]
    report["ratio_direct_p50"] = report["governed direct"]["p50_ms"] / report["plain"]["p50_ms"]
    report["ratio_direct_cpu_p50"] = (
        report["governed direct"]["cpu_p50_ms"] / report["plain"]["cpu_p50_ms"]
    )
    report["ratio_middleware_p50"] = (
        report["middleware"]["p50_ms"] / report["create_agent"]["p50_ms"]
    )
    report["ratio_middleware_p90"] = (
        report["middleware"]["p90_ms"] / report["create_agent"]["p90_ms"]
    )
    report["ratio_middleware_cpu_p50"] = (
        report["middleware"]["cpu_p50_ms"] / report["create_agent"]["cpu_p50_ms"]
    )
    report["emissions_per_turn"] = len(contexts)
    for name in ("emitter", "emitter copying", "emitter sdk"):
        report[name]["per_emission_ms"] = report[name]["p50_ms"] / len(contexts)
    report["emission_target_ms"] = EMISSION_TARGET_MS
    report["emission_met"] = report["emitter"]["per_emission_ms"] <= EMISSION_TARGET_MS
    report["floor_ratio_p50"] = (report["plain"]["p50_ms"] + report["emitter"]["p50_ms"]) / report[
        "plain"
    ]["p50_ms"]
    report["floor_ratio_cpu_p50"] = (
        report["plain"]["cpu_p50_ms"] + report["emitter"]["cpu_p50_ms"]
    ) / report["plain"]["cpu_p50_ms"]
    report["target"] = TARGET
    report["met"] = report["ratio_p50"] <= TARGET
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"one turn, {CALLS} allowed tool calls, {INTERCEPTORS} interceptors, in-memory "
        "checkpointer; load average " + " ".join(f"{x:.2f}" for x in report["load_average"])
    )
    for name in variants:
        r = report[name]
        each = f"   {r['per_emission_ms']:.3f} ms per emission" if "per_emission_ms" in r else ""
        print(
            f"  {name:<16} p50 {r['p50_ms']:7.2f} ms   p90 {r['p90_ms']:7.2f} ms"
            f"   cpu p50 {r['cpu_p50_ms']:7.2f} ms{each}"
        )
    verdict = "met" if report["met"] else "NOT met"
    print(
        f"  ratio     p50 {report['ratio_p50']:.2f}x  p90 {report['ratio_p90']:.2f}x"
        f"  cpu p50 {report['ratio_cpu_p50']:.2f}x   (target <= {TARGET}: {verdict})"
    )
    print(
        f"  governed direct / plain  p50 {report['ratio_direct_p50']:.2f}x"
        f"  cpu p50 {report['ratio_direct_cpu_p50']:.2f}x"
    )
    print(
        f"  middleware / create_agent  p50 {report['ratio_middleware_p50']:.2f}x"
        f"  p90 {report['ratio_middleware_p90']:.2f}x"
        f"  cpu p50 {report['ratio_middleware_cpu_p50']:.2f}x"
    )
    verdict = "met" if report["emission_met"] else "NOT met"
    print(
        f"  per emission (HostEmitter, {INTERCEPTORS} read-only interceptors) "
        f"{report['emitter']['per_emission_ms']:.3f} ms (target <= {EMISSION_TARGET_MS}: "
        f"{verdict}); the SDK's {report['emitter sdk']['per_emission_ms']:.3f} ms"
    )
    print(
        f"  the emitter alone costs {report['emitter']['p50_ms']:.2f} ms for the turn's "
        f"{len(contexts)} emissions: no host on it can do better than "
        f"{report['floor_ratio_p50']:.2f}x here ({report['floor_ratio_cpu_p50']:.2f}x by CPU)"
    )


if __name__ == "__main__":
    asyncio.run(main())
