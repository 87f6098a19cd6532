"""Approval-cycle latency: bare LangGraph against the full approvals cycle, in one run.

    python bench/approval_cycle.py [--json] [--resume-path inline|workers] [--trace N]
                                   [--pyinstrument]

Both variants run the same agent shape on the same database and connection pool, bare on
LangGraph's ``AsyncPostgresSaver`` as shipped, ours on the engine's (``PooledSaver``: the same
statements without the stock saver's one lock; ``--bare-saver engine`` gives bare the same):
a scripted model proposes one ``issue_refund`` call, the tool step pauses with ``interrupt()``,
is resumed, runs the tool once (one ``demo_side_effects`` row, as the example refund tool does)
and the model gives its final answer.

* bare: ``ainvoke(input)`` up to the interrupt, then ``ainvoke(Command(resume=...))``.
* ours: ``runner.start`` (pause, record) -> ``engine.decide`` (consume, queue) ->
  ``Worker.process_one`` (claim, lock, re-check, resume, execute, ledger). The worker is
  called directly, so the LISTEN/NOTIFY wake-up latency of a real worker is not counted: by
  each lane, until its own run has been resumed (``--resume-path inline``, the default; at
  concurrency 16 a lane may first finish another lane's job), or by worker coroutines beside
  the lanes, one woken per decision, as a deployment runs workers apart from its starters and
  as DBOS runs its workflows (``--resume-path workers``).
* floor: the bare cycle plus ``REQUIRED_COMMITS`` one-row commits, the durable writes the
  contract adds (pending-call record, decision, job claim and close, ledger start and finish),
  with no Python of ours at all. ``floor / bare`` is the best ratio any implementation of the
  contract could reach on this database and machine.
* floor+emit: the floor plus the interception contexts one of our cycles emits (captured from
  a real cycle, copied before timing), replayed through the emitter the engine uses
  (``graphs.emitter.emitter_class``: ``HostEmitter``, or the SDK's ``InterceptionEmitter`` with
  ``APPROVALS_EMITTER=sdk``) with one allow-everything interceptor: the emitter's share of a
  governed cycle (every interception point goes through it, AGENT-HOOKS-0.1), still with no
  other Python of ours.
* stmts: bare's cycle inside every durable statement the engine's own cycle sends, through
  its storage layer with the arguments a real cycle gave it, plus the emissions of floor+emit
  (``bench/statement_floor.py``): what the engine's statements cost as its schema writes them
  (audit events, interception records, run events and all), with none of its orchestration.
  ``ours / stmts`` is what the engine's Python between them, and ``durability="sync"``, add.
* dbos: the same cycle as a DBOS workflow (``bench/dbos_cycle.py``): the model's turns and the
  tool are steps, the workflow pauses on ``DBOS.recv``, the approver reads the pending call
  (``DBOS.get_event``) and delivers the decision with ``DBOS.send``. DBOS's system tables are in
  a database of their own on the same server; the tool writes to the bench's database. Left
  out, with the reason, when the ``bench`` extra (DBOS) is not installed.

Ours runs LangGraph with ``durability="sync"`` (a step's checkpoint is written before the next
step starts, so a crash never replays a model turn whose tool calls already ran); bare runs with
LangGraph's default, ``async``. ``--bare-durability sync`` gives bare the same guarantee.

Concurrency 1 and 16 (16 lanes, each running cycles back to back), bare and ours rounds
alternating. Each cycle is timed on its own; the ratio is ours / bare at p50 and p99. Targets
(issue 16): ours / bare at most ``TARGET`` at p50 and p99, at both concurrencies, and ours at
most DBOS's p50. ``--count`` also counts each variant's statements per cycle (client side,
every ``execute`` and each ``executemany`` row) and the server's commits per cycle. The cpu
column is this process's CPU time (all threads, user + system) over a variant's rounds, per
cycle: the client's share, without the database server's; db cpu is the time the server's
backends serving the variant's databases spent on a CPU (``/proc/<pid>/schedstat``, when the
server runs on this machine).
The database is ``APPROVALS_DATABASE_URL`` (a server admin URL; a scratch database
``approvals_bench_<pid>`` is created, migrated and dropped, and ``approvals_bench_<pid>_dbos``
for DBOS) or else the embedded server in ``.approvals/bench-pg``. Exit status 0 whether or not
the targets are met: this is a bench.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import copy
import gc
import importlib.metadata
import json
import os
import platform
import re
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from agent_hooks import InterceptionEmitter, Verdict
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt
from pydantic import Field

from graphs.agent import AgentGraph, AgentState, ToolTask, build_agent
from graphs.deps import GraphDeps
from graphs.emitter import JsonContext, emitter_class
from graphs.examples.demo import current_turn, result_of
from graphs.examples.effects import side_effects
from graphs.scripted import ScriptedChatModel
from graphs.tools import GovernedTool, ToolCall, governed_tool
from web.cli.command import run_loop

if TYPE_CHECKING:
    from bench.dbos_cycle import DbosCycle

ROOT = Path(__file__).resolve().parent.parent
GRAPH = "bench"
GRAPH_ENTRY = "bench.approval_cycle:build"
MESSAGE = "Please refund order 1001"
REQUESTER = "bench-requester"
APPROVER = "bench-approver"
#: Ours / bare, at p50 and p99 (issue 16; the long-term aim stays 1.3).
TARGET = 1.6
#: ``--resume-path``: how ours' runs are resumed, as the report says it.
RESUME_PATHS = {
    "inline": "Worker.process_one() called in-line by each lane until its own run has been "
    "resumed (LISTEN/NOTIFY wake-up not counted)",
    "workers": "worker coroutines beside the lanes (as many as lanes), one woken per decision "
    "(LISTEN/NOTIFY wake-up not counted)",
}

# --------------------------------------------------------------------------------------
# The agent, shared by both variants: one model turn proposing one refund, one tool call,
# one final model turn.
# --------------------------------------------------------------------------------------


def bench_script(messages: list[BaseMessage]) -> AIMessage:
    text, results = current_turn(messages)
    if not results:
        match = re.search(r"\b\d{4}\b", text)
        order_id = match.group(0) if match else "1001"
        return AIMessage(
            content="",
            tool_calls=[
                {
                    "id": f"refund-{order_id}",
                    "name": "issue_refund",
                    "args": {"order_id": order_id, "amount": 25.0, "reason": "customer request"},
                }
            ],
        )
    outcome = result_of(results[-1])
    if "error" in outcome:
        return AIMessage(content=f"Refund not issued: {outcome['error']}")
    return AIMessage(content=f"Refunded {outcome['amount']:.2f} on order {outcome['order_id']}.")


async def refund(
    effects: Any, *, run_id: str, call_id: str, key: str, order_id: str, amount: float, reason: str
) -> dict[str, object]:
    """The tool body both variants run: one side-effect row, like the example refund tool."""
    await effects.record(
        run_id=run_id,
        call_id=call_id,
        tool="issue_refund",
        args={"order_id": order_id, "amount": amount, "reason": reason},
    )
    return {"refund_id": f"rf_{key[:12]}", "order_id": order_id, "amount": amount}


def build(deps: GraphDeps) -> AgentGraph:
    """The governed variant (registered as ``bench``)."""

    @governed_tool(sensitive=True)
    async def issue_refund(
        call: ToolCall,
        order_id: str = Field(pattern=r"^\d{4}$"),
        amount: float = Field(gt=0, le=10_000),
        reason: str = Field(default="customer request", max_length=200),
    ) -> dict[str, object]:
        """Refund money to the customer of an order. Moves money: needs approval."""
        return await refund(
            side_effects(deps),
            run_id=call.run_id,
            call_id=call.call_id,
            key=call.idempotency_key,
            order_id=order_id,
            amount=amount,
            reason=reason,
        )

    tools: list[GovernedTool] = [issue_refund]
    return build_agent(name=GRAPH, model=ScriptedChatModel(bench_script), tools=tools, deps=deps)


def build_bare(checkpointer: Any, effects: Any) -> Any:
    """The bare variant: the same state, nodes and Send fan-out, ``interrupt()`` in the tool."""
    model = ScriptedChatModel(bench_script)

    async def agent(state: AgentState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(list(state["messages"]))]}

    def route(state: AgentState) -> list[Send] | str:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            return [
                Send(
                    "tools",
                    ToolTask(
                        call=dict(tc),
                        run_id=state["run_id"],
                        started_by=state["started_by"],
                        tool_counts={},
                    ),
                )
                for tc in last.tool_calls
            ]
        return END

    async def tools(task: ToolTask, config: RunnableConfig) -> dict[str, Any]:
        call = task["call"]
        decision = interrupt({"call_id": call["id"], "tool": call["name"], "args": call["args"]})
        if not (isinstance(decision, dict) and decision.get("verdict") == "approve"):
            content = json.dumps({"error": {"code": "rejected"}})
        else:
            result = await refund(
                effects,
                run_id=task["run_id"],
                call_id=str(call["id"]),
                key=uuid.uuid5(uuid.NAMESPACE_URL, f"{task['run_id']}/{call['id']}").hex,
                **call["args"],
            )
            content = json.dumps(result, sort_keys=True)
        return {
            "messages": [ToolMessage(content=content, tool_call_id=call["id"], name=call["name"])]
        }

    builder = StateGraph(AgentState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)  # type: ignore[arg-type]
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer, name="bare")


# --------------------------------------------------------------------------------------
# A small profiler: per-phase wall time of named operations (SQL statement, transaction
# begin/commit, saver call, aget_state), exclusive of the operations nested inside them.
# --------------------------------------------------------------------------------------


@dataclass
class _Frame:
    label: str
    child: float = 0.0


_stack: contextvars.ContextVar[tuple[_Frame, ...]] = contextvars.ContextVar("stack", default=())
_phase: contextvars.ContextVar[str] = contextvars.ContextVar("phase", default="-")


@dataclass
class Profile:
    enabled: bool = False
    ops: dict[tuple[str, str], list[float]] = field(
        default_factory=lambda: defaultdict(lambda: [0, 0.0])
    )
    phases: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def reset(self) -> None:
        self.ops.clear()
        self.phases.clear()

    async def timed(self, label: str, awaitable: Awaitable[Any]) -> Any:
        if not self.enabled:
            return await awaitable
        frame = _Frame(label)
        token = _stack.set((*_stack.get(), frame))
        t0 = time.perf_counter()
        try:
            return await awaitable
        finally:
            elapsed = time.perf_counter() - t0
            _stack.reset(token)
            self._record(label, elapsed, elapsed - frame.child)

    def _record(self, label: str, elapsed: float, exclusive: float) -> None:
        parents = _stack.get()
        if parents:
            parents[-1].child += elapsed
        entry = self.ops[(_phase.get(), label)]
        entry[0] += 1
        entry[1] += exclusive

    def wrap(self, obj: Any, method: str, label: Callable[..., str]) -> None:
        original = getattr(obj, method)

        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            return await self.timed(label(*args, **kwargs), original(*args, **kwargs))

        setattr(obj, method, wrapper)

    def wrap_cm(self, obj: Any, method: str, label: str) -> None:
        """Time entering (pool acquire + BEGIN) and leaving (COMMIT + release) separately."""
        original = getattr(obj, method)
        profile = self

        @asynccontextmanager
        async def wrapper(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            cm = original(*args, **kwargs)
            value = await profile.timed(f"{label} enter", cm.__aenter__())
            try:
                yield value
            except BaseException as exc:
                if not await profile.timed(
                    f"{label} exit", cm.__aexit__(type(exc), exc, exc.__traceback__)
                ):
                    raise
            else:
                await profile.timed(f"{label} exit", cm.__aexit__(None, None, None))

        setattr(obj, method, wrapper)


PROFILE = Profile()


@asynccontextmanager
async def phase(name: str) -> AsyncIterator[None]:
    token = _phase.set(name)
    t0 = time.perf_counter()
    try:
        yield
    finally:
        PROFILE.phases[name] += time.perf_counter() - t0
        _phase.reset(token)


def instrument(engine: Any, graph: Any, bare: Any) -> None:
    """Patch instances (never classes) so every DB round trip of both variants is timed."""
    db = engine._db  # its own round trips are what the benchmark times
    PROFILE.wrap(db, "one", lambda name, *a, **k: f"sql {name}")
    PROFILE.wrap(db, "all", lambda name, *a, **k: f"sql {name}")
    PROFILE.wrap(db, "run", lambda name, *a, **k: f"sql {name}")
    PROFILE.wrap_cm(db, "transaction", "tx")
    saver = graph.checkpointer
    for method in ("aget_tuple", "aput", "aput_writes"):
        PROFILE.wrap(saver, method, lambda *a, _m=method, **k: f"saver {_m}")
    PROFILE.wrap(graph, "aget_state", lambda *a, **k: "aget_state (python)")
    PROFILE.wrap(bare, "aget_state", lambda *a, **k: "aget_state (python)")


# --------------------------------------------------------------------------------------
# One cycle of each variant.
# --------------------------------------------------------------------------------------


class TrackingRunner:
    """Hands ``Worker`` the engine's runner, and tells each cycle when its own run resumed
    (at concurrency 16 a lane's ``process_one`` may claim another lane's job)."""

    def __init__(self, runner: Any) -> None:
        self._runner = runner
        self.waiting: dict[str, asyncio.Future[Any]] = {}

    def expect(self, run_id: str) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting[run_id] = future
        return future

    async def resume(self, claimed: Any) -> Any:
        future = self.waiting.pop(claimed.job.run_id, None)
        try:
            outcome = await self._runner.resume(claimed)
        except BaseException as exc:
            if future is not None and not future.done():
                future.set_exception(exc)
            raise
        if future is not None and not future.done():
            future.set_result(outcome)
        return outcome


@dataclass
class Sample:
    total: float
    phases: dict[str, float]


async def bare_cycle(graph: Any, durability: str = "async") -> Sample:
    thread_id = str(uuid.uuid4())
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    payload = {
        "messages": [HumanMessage(content=MESSAGE)],
        "run_id": thread_id,
        "started_by": REQUESTER,
    }
    t0 = time.perf_counter()
    async with phase("bare: invoke to interrupt"):
        paused = await graph.ainvoke(payload, config, durability=durability)
    t1 = time.perf_counter()
    async with phase("bare: resume to end"):
        done = await graph.ainvoke(
            Command(resume={"verdict": "approve", "principal": APPROVER}),
            config,
            durability=durability,
        )
    t2 = time.perf_counter()
    if "__interrupt__" not in paused or not str(done["messages"][-1].content).startswith(
        "Refunded"
    ):
        raise RuntimeError(f"bare cycle did not pause and finish: {done['messages'][-1]}")
    return Sample(t2 - t0, {"invoke": t1 - t0, "resume": t2 - t1})


# The durable writes the engine's own contract adds to a cycle, each its own commit: the
# pending-call record, the decision (request, decision row, audit event, queue row), the
# worker's claim and close of the job, and the ledger row's start and finish.
REQUIRED_COMMITS = 5


async def floor_cycle(graph: Any, pool: Any, durability: str = "async") -> Sample:
    """The bare cycle plus ``REQUIRED_COMMITS`` one-row commits and nothing else: what no
    implementation of the contract on this database can beat, whatever its Python costs."""
    sample = await bare_cycle(graph, durability)
    t0 = time.perf_counter()
    for _ in range(REQUIRED_COMMITS):
        async with pool.connection() as conn:
            await conn.execute("INSERT INTO bench_floor DEFAULT VALUES")
    extra = time.perf_counter() - t0
    return Sample(sample.total + extra, {**sample.phases, "commits": extra})


class AllowAll:
    """The cheapest policy there is: the floor+emit variant's only interceptor. It reads the
    context only, and says so, as the policy engine does."""

    context_read_only = True

    def intercept(self, ctx: dict[str, Any], /) -> Verdict:
        return Verdict.allow()


async def floor_emit_cycle(
    graph: Any, pool: Any, contexts: list[dict[str, Any]], durability: str = "async"
) -> Sample:
    """The floor plus one cycle's interception contexts through the engine's emitter. The
    emitter and fresh copies of the contexts are made before timing (a host builds its
    contexts anyway); only the emissions are timed."""
    sample = await floor_cycle(graph, pool, durability)
    extra = await emit_contexts(contexts)
    return Sample(sample.total + extra, {**sample.phases, "emit": extra})


async def emit_contexts(contexts: list[dict[str, Any]]) -> float:
    """Seconds taken to emit fresh copies of ``contexts`` through the engine's emitter, with
    one allow-everything interceptor (the copies and the emitter made before timing)."""
    emitter = emitter_class()()
    emitter.register(AllowAll(), name="AllowAll")
    fresh = [JsonContext(copy.deepcopy(ctx)) for ctx in contexts]
    t0 = time.perf_counter()
    for ctx in fresh:
        await emitter.emit_unchecked(ctx)
    return time.perf_counter() - t0


async def captured_contexts(engine: Any, worker: Any, tracker: TrackingRunner) -> list[Any]:
    """The interception contexts one of our cycles emits, as each emission received them."""
    seen: list[dict[str, Any]] = []
    cls = emitter_class()
    original = cls.emit_unchecked

    async def recording(self: InterceptionEmitter, ctx: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(copy.deepcopy(dict(ctx)))
        return await original(self, ctx, *args, **kwargs)

    cls.emit_unchecked = recording  # type: ignore[method-assign]
    try:
        await ours_cycle(engine, worker, tracker)
    finally:
        cls.emit_unchecked = original  # type: ignore[method-assign]
    return seen


class WorkerTasks:
    """``--resume-path workers``: worker coroutines beside the lanes, as a deployment runs its
    workers apart from whoever starts runs (and as DBOS runs its workflows). Each decision
    wakes one, which claims the oldest queued job (a LISTEN/NOTIFY worker, without the
    notification's latency); a cycle ends when its own run has been resumed, not when the
    lane's own claim (perhaps another lane's job) is done."""

    def __init__(self, worker: Any, count: int) -> None:
        self._worker = worker
        self._count = count
        self._wake: asyncio.Queue[None] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._busy = 0
        #: Set while no wake-up waits and no worker is inside a claim.
        self._quiet = asyncio.Event()
        self._quiet.set()
        #: Set with the error of the first worker coroutine that dies, so that a lane waiting
        #: on its run fails with that error rather than a timeout.
        self.died: asyncio.Future[None] | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[WorkerTasks]:
        self.died = asyncio.get_running_loop().create_future()
        self._tasks = [asyncio.create_task(self._serve()) for _ in range(self._count)]
        try:
            yield self
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def wake(self) -> None:
        self._quiet.clear()
        self._wake.put_nowait(None)

    async def quiet(self) -> None:
        """Until every wake-up has been served and each claim's transaction has ended. A lane's
        cycle ends when its run has been resumed, before the worker's claim commits the job's
        close: counting the jobs left queued before then would count that one."""
        await self._quiet.wait()

    async def outcome(self, resumed: asyncio.Future[Any], seconds: float) -> Any:
        """``resumed``'s result once a worker has resumed the run; a worker's error if one died
        first."""
        assert self.died is not None, "outcome() outside running()"
        await asyncio.wait({resumed, self.died}, timeout=seconds, return_when="FIRST_COMPLETED")
        if self.died.done():
            self.died.result()
        if not resumed.done():
            raise TimeoutError(f"no worker resumed the run within {seconds:.0f} s")
        return resumed.result()

    async def _serve(self) -> None:
        try:
            while True:
                await self._wake.get()
                self._busy += 1
                try:
                    # One claim per decision; a job another worker's claim transaction still
                    # holds is skipped (SKIP LOCKED), so a claim may find nothing for a moment:
                    # again.
                    while True:
                        if await self._worker.process_one():
                            break
                        await asyncio.sleep(0.001)
                finally:
                    self._busy -= 1
                    if self._busy == 0 and self._wake.empty():
                        self._quiet.set()
        except Exception as exc:
            if self.died is not None and not self.died.done():
                self.died.set_exception(exc)
            raise


async def ours_cycle(
    engine: Any, worker: Any, tracker: TrackingRunner, workers: WorkerTasks | None = None
) -> Sample:
    t0 = time.perf_counter()
    async with phase("ours: start (pause, record)"):
        started = await engine.runner.start(GRAPH, {"message": MESSAGE}, principal=REQUESTER)
    t1 = time.perf_counter()
    if started.status != "waiting" or len(started.pending) != 1:
        raise RuntimeError(f"run did not pause: {started}")
    resumed = tracker.expect(started.run_id)
    async with phase("ours: decide (consume, queue)"):
        await engine.decide_as_operator(started.pending[0], "approve", principal=APPROVER)
    t2 = time.perf_counter()
    async with phase("ours: resume (claim .. execute)"):
        if workers is not None:
            workers.wake()
            outcome = await workers.outcome(resumed, 120)
        else:
            # At c=16 another lane's process_one may claim this lane's job, or this one may
            # find the queue empty for the moment: claim until this run has been resumed.
            while not resumed.done():
                if not await worker.process_one():
                    await asyncio.wait({resumed}, timeout=0.002)
            outcome = resumed.result()
    t3 = time.perf_counter()
    if (
        outcome is None
        or outcome.status != "completed"
        or not str(outcome.answer).startswith("Refunded")
    ):
        raise RuntimeError(f"run did not complete: {outcome}")
    return Sample(t3 - t0, {"start": t1 - t0, "decide": t2 - t1, "resume": t3 - t2})


# --------------------------------------------------------------------------------------
# Rounds, statistics, output.
# --------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass
class Series:
    samples: list[Sample] = field(default_factory=list)
    wall: float = 0.0
    #: This process's CPU time (user + system) over the variant's rounds: the client's
    #: share of a cycle (Python, drivers), the database server's not included.
    cpu: float = 0.0
    #: The database server's backends' CPU time over the same rounds (``None``: not readable).
    server_cpu: float | None = None

    def summary(self) -> dict[str, Any]:
        totals = [s.total for s in self.samples]
        phase_names = self.samples[0].phases if self.samples else {}
        return {
            "cycles": len(totals),
            "p50_ms": round(percentile(totals, 0.50) * 1000, 3),
            "p99_ms": round(percentile(totals, 0.99) * 1000, 3),
            "mean_ms": round(sum(totals) / len(totals) * 1000, 3) if totals else None,
            "throughput_per_s": round(len(totals) / self.wall, 1) if self.wall else None,
            "cpu_ms_per_cycle": round(self.cpu / len(totals) * 1000, 3) if totals else None,
            "server_cpu_ms_per_cycle": (
                round(self.server_cpu / len(totals) * 1000, 3)
                if totals and self.server_cpu is not None
                else None
            ),
            "phases_p50_ms": {
                name: round(percentile([s.phases[name] for s in self.samples], 0.5) * 1000, 3)
                for name in phase_names
            },
        }


def schedstat_ns(pid: int) -> int | None:
    """A process's time on a CPU, in ns (``None``: gone, or not on this machine). A read
    from procfs: never waits on a disk."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class ServerCpu:
    """CPU time of the database server's backends serving given databases: the time each
    spent on a CPU (``/proc/<pid>/schedstat``, in ns), so only for a server on this machine.
    Read on a connection of its own, whose backend is left out."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    @classmethod
    @asynccontextmanager
    async def opened(cls, url: str) -> AsyncIterator[ServerCpu | None]:
        import psycopg

        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            cur = await conn.execute("SELECT pg_backend_pid()")
            row = await cur.fetchone()
            readable = row is not None and schedstat_ns(row[0]) is not None
            yield cls(conn) if readable else None

    async def snapshot(self, databases: list[str]) -> dict[int, int]:
        cur = await self._conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = ANY(%s) AND pid <> pg_backend_pid()",
            (databases,),
        )
        out: dict[int, int] = {}
        for (pid,) in await cur.fetchall():
            ns = schedstat_ns(pid)
            if ns is not None:
                out[pid] = ns
        return out

    @staticmethod
    def spent(before: dict[int, int], after: dict[int, int]) -> float:
        """Seconds on a CPU between two snapshots (a backend that appeared: all of its own;
        one that ended in between is lost)."""
        return sum(ns - before.get(pid, 0) for pid, ns in after.items()) / 1e9


@dataclass
class Probe:
    """Where ``run_round`` reads the server's CPU, and which databases count."""

    server: ServerCpu
    databases: list[str]


async def run_round(
    cycle: Callable[[], Awaitable[Sample]],
    lanes: int,
    per_lane: int,
    series: Series | None,
    probe: Probe | None = None,
) -> None:
    async def lane() -> list[Sample]:
        return [await cycle() for _ in range(per_lane)]

    gc.collect()
    before = await probe.server.snapshot(probe.databases) if probe and series else {}
    c0 = time.process_time()
    t0 = time.perf_counter()
    results = await asyncio.gather(*(lane() for _ in range(lanes)))
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    if series is not None:
        series.wall += wall
        series.cpu += cpu
        if probe is not None:
            after = await probe.server.snapshot(probe.databases)
            series.server_cpu = (series.server_cpu or 0.0) + ServerCpu.spent(before, after)
        for samples in results:
            series.samples.extend(samples)


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


async def admin(url: str, statement: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(statement)


@dataclass(frozen=True)
class Scratch:
    url: str
    where: str
    #: DBOS's system database, on the same server (``None``: DBOS is not installed).
    dbos_url: str | None


@asynccontextmanager
async def scratch_database(with_dbos: bool) -> AsyncIterator[Scratch]:
    from storage.migrate import upgrade

    admin_url = os.environ.get("APPROVALS_DATABASE_URL")
    where = "APPROVALS_DATABASE_URL"
    if not admin_url:
        from storage.embedded import start_embedded

        data_dir = ROOT / ".approvals" / "bench-pg"
        admin_url = await asyncio.to_thread(start_embedded, data_dir)
        where = f"embedded ({data_dir})"
    name = f"approvals_bench_{os.getpid()}"
    names = [name, f"{name}_dbos"] if with_dbos else [name]
    for n in names:
        await admin(admin_url, f"DROP DATABASE IF EXISTS {n} WITH (FORCE)")
        await admin(admin_url, f"CREATE DATABASE {n}")
    try:
        url = with_database(admin_url, name)
        await upgrade(url)
        dbos_url = with_database(admin_url, names[1]) if with_dbos else None
        yield Scratch(url, f"{where}, scratch database {name}", dbos_url)
    finally:
        for n in names:
            await admin(admin_url, f"DROP DATABASE IF EXISTS {n} WITH (FORCE)")


# --------------------------------------------------------------------------------------
# Counting statements and commits (--count).
# --------------------------------------------------------------------------------------


class StatementCounter:
    """Counts what this process sends, by patching psycopg's async cursor (the one path every
    statement here takes: the engine's, LangGraph's saver's): one per ``execute``, one per
    row of an ``executemany``. DBOS's system database uses psycopg's sync driver: its
    statements show in the server's commit count only."""

    def __init__(self) -> None:
        self.count = 0
        self.by_statement: dict[str, int] = defaultdict(int)

    @contextmanager
    def installed(self) -> Iterator[None]:
        import psycopg

        cursor = psycopg.AsyncCursor
        execute, executemany = cursor.execute, cursor.executemany
        counter = self

        async def counted_execute(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
            counter.note(query, 1)
            return await execute(self, query, params, **kw)

        async def counted_executemany(self: Any, query: Any, seq: Any, **kw: Any) -> Any:
            rows = list(seq)
            counter.note(query, len(rows))
            return await executemany(self, query, rows, **kw)

        cursor.execute = counted_execute  # type: ignore[method-assign]
        cursor.executemany = counted_executemany  # type: ignore[assignment,method-assign]
        try:
            yield
        finally:
            cursor.execute = execute  # type: ignore[method-assign]
            cursor.executemany = executemany  # type: ignore[method-assign]

    def note(self, query: Any, n: int) -> None:
        text = query.decode() if isinstance(query, bytes) else str(query)
        self.count += n
        self.by_statement[" ".join(text.split())[:60]] += n


#: PostgreSQL 15 flushes a backend's statistics at most once a second, and an idle backend's
#: within 10 s: the commit counters are read after this long a pause.
STATS_FLUSH = 11.0


async def server_commits(urls: list[str]) -> int:
    import psycopg

    total = 0
    for url in urls:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            cur = await conn.execute(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
            )
            row = await cur.fetchone()
            total += int(row[0]) if row else 0
    return total


async def count_variant(
    cycle: Callable[[], Awaitable[Sample]], cycles: int, urls: list[str]
) -> dict[str, Any]:
    """Statements (client side) and commits (server side) per cycle of one variant."""
    counter = StatementCounter()
    await asyncio.sleep(STATS_FLUSH)
    before = await server_commits(urls)
    with counter.installed():
        for _ in range(cycles):
            await cycle()
    await asyncio.sleep(STATS_FLUSH)
    # Less the reading connections' own commits (one per database read before).
    commits = await server_commits(urls) - before - len(urls)
    top = sorted(counter.by_statement.items(), key=lambda kv: -kv[1])
    return {
        "statements_per_cycle": round(counter.count / cycles, 2),
        "server_commits_per_cycle": round(commits / cycles, 2),
        "statements": {text: round(n / cycles, 2) for text, n in top},
    }


# --------------------------------------------------------------------------------------
# The run.
# --------------------------------------------------------------------------------------


def ratios(of: dict[str, Any], to: dict[str, Any]) -> dict[str, float]:
    return {
        "p50": round(of["p50_ms"] / to["p50_ms"], 3),
        "p99": round(of["p99_ms"] / to["p99_ms"], 3),
        "throughput": round(to["throughput_per_s"] / of["throughput_per_s"], 3),
        "cpu": round(of["cpu_ms_per_cycle"] / to["cpu_ms_per_cycle"], 3),
        **(
            {"server_cpu": round(of["server_cpu_ms_per_cycle"] / to["server_cpu_ms_per_cycle"], 3)}
            if of["server_cpu_ms_per_cycle"] and to["server_cpu_ms_per_cycle"]
            else {}
        ),
    }


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    if str(ROOT) not in sys.path:  # the registry imports GRAPH_ENTRY by module name
        sys.path.insert(0, str(ROOT))
    from bench.dbos_cycle import NOTIFICATION_COALESCE, DbosCycle
    from bench.dbos_cycle import import_error as dbos_import_error
    from bench.statement_floor import Cast, capture, statements_cycle
    from graphs.worker import Worker
    from web.engine import open_engine
    from web.settings import Settings

    dbos_missing = "left out (--no-dbos)" if args.no_dbos else dbos_import_error()
    async with scratch_database(with_dbos=dbos_missing is None) as scratch:
        url, where = scratch.url, scratch.where
        overrides = {"pool_max_size": args.pool_size} if args.pool_size else {}
        settings = Settings(
            database_url=url,
            graphs={GRAPH: GRAPH_ENTRY},
            config_file=ROOT / "bench" / "no-config.toml",
            **overrides,
        )
        if settings.pool_max_size <= args.lanes:
            raise SystemExit(
                f"pool_max_size {settings.pool_max_size} must exceed --lanes {args.lanes}: "
                "every in-flight cycle holds a connection for its thread lock or claim"
            )
        async with open_engine(url, settings) as engine, AsyncExitStack() as stack:
            graph = engine.registry.get(GRAPH)
            # Bare LangGraph as a user has it: the stock saver on the same pool (the engine's
            # own, storage.checkpoints.PooledSaver, only with --bare-saver engine).
            bare_saver = (
                graph.checkpointer
                if args.bare_saver == "engine"
                else AsyncPostgresSaver(engine._db.pool)
            )
            bare = build_bare(bare_saver, engine.effects)
            tracker = TrackingRunner(engine.runner)
            worker = Worker(runner=tracker, queue=engine.queue)  # type: ignore[arg-type]
            workers = None
            if args.resume_path == "workers":
                workers = await stack.enter_async_context(WorkerTasks(worker, args.lanes).running())
            dbos: DbosCycle | None = None
            if scratch.dbos_url is not None:
                dbos = await stack.enter_async_context(
                    DbosCycle(
                        effects=engine.effects,
                        script=bench_script,
                        message=MESSAGE,
                        approver=APPROVER,
                    ).launched(scratch.dbos_url, pool_size=max(20, 2 * args.lanes + 4))
                )

            async with engine.connection() as conn:
                await conn.execute("CREATE TABLE bench_floor (id bigserial PRIMARY KEY)")

            with capture(engine) as captured:
                contexts = await captured_contexts(engine, worker, tracker)
            writes = captured.complete()
            cast = Cast(graph=GRAPH, message=MESSAGE, requester=REQUESTER, approver=APPROVER)

            def make(variant: str) -> Callable[[], Awaitable[Sample]]:
                if variant == "bare":
                    return lambda: bare_cycle(bare, args.bare_durability)
                if variant == "floor":
                    return lambda: floor_cycle(bare, engine._db.pool, args.bare_durability)
                if variant == "floor+emit":
                    return lambda: floor_emit_cycle(
                        bare, engine._db.pool, contexts, args.bare_durability
                    )
                if variant == "stmts":

                    async def stmts_cycle() -> Sample:
                        total, phases = await statements_cycle(
                            engine,
                            engine.runner._checks,
                            bare,
                            writes,
                            lambda: emit_contexts(contexts),
                            cast,
                            args.bare_durability,
                        )
                        return Sample(total, phases)

                    return stmts_cycle
                if variant == "dbos":
                    assert dbos is not None

                    async def dbos_cycle() -> Sample:
                        assert dbos is not None
                        total, phases = await dbos.cycle()
                        return Sample(total, phases)

                    return dbos_cycle
                return lambda: ours_cycle(engine, worker, tracker, workers)

            variants = (
                "bare",
                "floor",
                "floor+emit",
                "stmts",
                "ours",
                *(("dbos",) if dbos else ()),
            )
            for v in variants:  # warm-up: imports, pool growth, plan caches
                await run_round(make(v), 1, args.warmup, None)
                await run_round(make(v), args.lanes, 2, None)

            server = await stack.enter_async_context(ServerCpu.opened(url))
            bench_db = urlsplit(url).path.lstrip("/")
            dbos_db = urlsplit(scratch.dbos_url).path.lstrip("/") if scratch.dbos_url else None

            def probe(variant: str) -> Probe | None:
                if server is None:
                    return None
                if variant == "dbos" and dbos_db is not None:
                    return Probe(server, [bench_db, dbos_db])
                return Probe(server, [bench_db])

            results = []
            plans = [(1, args.cycles, args.rounds), (args.lanes, args.per_lane, args.rounds_c16)]
            for lanes, per_lane_total, rounds in plans:
                series = {v: Series() for v in variants}
                per_round = max(1, per_lane_total // rounds)
                for r in range(rounds):
                    order = variants if r % 2 == 0 else variants[::-1]
                    for v in order:
                        await run_round(make(v), lanes, per_round, series[v], probe(v))
                summary = {v: series[v].summary() for v in variants}
                bare_s, ours_s = summary["bare"], summary["ours"]
                ratio = ratios(ours_s, bare_s)
                result: dict[str, Any] = {
                    "concurrency": lanes,
                    **summary,
                    "ratio": ratio,
                    "floor_ratio": ratios(summary["floor"], bare_s),
                    "floor_emit_ratio": ratios(summary["floor+emit"], bare_s),
                    "stmts_ratio": ratios(summary["stmts"], bare_s),
                    "ours_over_stmts": ratios(ours_s, summary["stmts"]),
                    "target_met": ratio["p50"] <= TARGET and ratio["p99"] <= TARGET,
                }
                if dbos is not None:
                    dbos_s = summary["dbos"]
                    result["dbos_ratio"] = ratios(dbos_s, bare_s)
                    result["ours_over_dbos"] = ratios(ours_s, dbos_s)
                    result["dbos_target_met"] = ours_s["p50_ms"] <= dbos_s["p50_ms"]
                results.append(result)

            counts_per_cycle = None
            if args.count:
                # DBOS's own database only for DBOS: its background threads commit there
                # whatever runs, and would be counted as the other variants' commits.
                urls = {v: [url] for v in ("bare", "ours")}
                if dbos is not None and scratch.dbos_url is not None:
                    urls["dbos"] = [url, scratch.dbos_url]
                counts_per_cycle = {
                    v: await count_variant(make(v), args.count, urls[v]) for v in urls
                }

            trace = None
            if args.trace:
                instrument(engine, graph, bare)
                PROFILE.enabled = True
                trace = {}
                for v in ("bare", "ours"):
                    PROFILE.reset()
                    if args.pyinstrument and v == "ours":
                        from pyinstrument import Profiler

                        profiler = Profiler(async_mode="enabled", interval=0.0002)
                        profiler.start()
                        await run_round(make(v), 1, args.trace, None)
                        profiler.stop()
                        print(profiler.output_text(unicode=True, color=False), file=sys.stderr)
                    else:
                        await run_round(make(v), 1, args.trace, None)
                    trace[v] = trace_summary(args.trace)
                PROFILE.enabled = False

            if workers is not None:
                await asyncio.wait_for(workers.quiet(), 120)
            counts = await count_rows(engine)
    expected = (
        1  # the cycle whose contexts floor+emit replays
        + len(variants) * (args.warmup + 2 * args.lanes)
        + len(variants) * sum(lanes * max(1, n // r) * r for lanes, n, r in plans)
        + (len(counts_per_cycle) * args.count if counts_per_cycle else 0)
        + 2 * args.trace
    )
    return {
        "bench": "approval_cycle",
        "database": where,
        "pool_max_size": settings.pool_max_size,
        "resume_path": RESUME_PATHS[args.resume_path],
        "bare_durability": args.bare_durability,
        "bare_saver": args.bare_saver,
        "emitter": emitter_class().__name__,
        "dbos": (
            {
                "version": importlib.metadata.version("dbos"),
                "system_database": "a database of its own on the same server",
                "notification_coalesce_sec": NOTIFICATION_COALESCE,
            }
            if dbos is not None
            else {"missing": dbos_missing}
        ),
        "python": platform.python_version(),
        "event_loop": type(asyncio.get_running_loop()).__module__.split(".")[0],
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "target": TARGET,
        "required_commits": REQUIRED_COMMITS,
        "emissions_per_cycle": len(contexts),
        "results": results,
        "target_met": all(r["target_met"] for r in results),
        "dbos_target_met": (
            all(r["dbos_target_met"] for r in results) if dbos is not None else None
        ),
        "counts_per_cycle": counts_per_cycle,
        "checks": {
            "side_effects": counts["effects"],
            "expected_side_effects": expected,
            "tool_ran_once_per_cycle": counts["effects"] == expected and counts["dupes"] == 0,
            "jobs_left_queued": counts["queued"],
        },
        "trace": trace,
    }


async def count_rows(engine: Any) -> dict[str, int]:
    async with engine.connection() as conn:
        cur = await conn.execute(
            "SELECT (SELECT count(*) FROM demo_side_effects) AS effects,"
            " (SELECT count(*) FROM (SELECT 1 FROM demo_side_effects GROUP BY run_id, call_id"
            "   HAVING count(*) > 1) d) AS dupes,"
            " (SELECT count(*) FROM resume_queue WHERE status = 'queued') AS queued"
        )
        row = await cur.fetchone()
    return {k: int(v) for k, v in row.items()}


def trace_summary(cycles: int) -> dict[str, Any]:
    phases: dict[str, Any] = {}
    for name, total in PROFILE.phases.items():
        ops = {
            label: {"per_cycle": round(n / cycles, 2), "ms_per_cycle": round(t / cycles * 1000, 3)}
            for (p, label), (n, t) in sorted(PROFILE.ops.items(), key=lambda kv: -kv[1][1])
            if p == name
        }
        phases[name] = {"ms_per_cycle": round(total / cycles * 1000, 3), "ops": ops}
    return phases


def render(report: dict[str, Any]) -> str:
    dbos = report["dbos"]
    lines = [
        "approval cycle: bare LangGraph vs approvals vs DBOS (same database server, one run)",
        f"database: {report['database']}; pool max {report['pool_max_size']}; "
        f"python {report['python']} on {report['event_loop']}'s loop, {report['cpus']} cpus,"
        " load average " + " ".join(f"{x:.2f}" for x in report["load_average"]),
        f"ours resumes via {report['resume_path']}; bare runs with durability="
        f"{report['bare_durability']}, ours with sync; bare's saver {report['bare_saver']}; "
        f"emitter {report['emitter']}",
        f"dbos: {dbos['version']}, system tables in a database of their own"
        if "version" in dbos
        else f"dbos: NOT measured: {dbos['missing']}",
        "",
        f"{'conc':>4}  {'variant':<10} {'cycles':>6} {'p50 ms':>8} {'p99 ms':>8} {'cycles/s':>9}"
        f" {'cpu ms':>7} {'db cpu':>7}   phases p50 ms (cpu: this process's, db cpu: the"
        " server's backends', per cycle)",
    ]
    for r in report["results"]:
        for v in ("bare", "floor", "floor+emit", "stmts", "ours", "dbos"):
            if v not in r:
                continue
            s = r[v]
            phases = "  ".join(f"{k} {ms:.2f}" for k, ms in s["phases_p50_ms"].items())
            lines.append(
                f"{r['concurrency']:>4}  {v:<10} {s['cycles']:>6} {s['p50_ms']:>8.2f} "
                f"{s['p99_ms']:>8.2f} {s['throughput_per_s']:>9.1f} {s['cpu_ms_per_cycle']:>7.2f}"
                f" {s['server_cpu_ms_per_cycle'] or float('nan'):>7.2f}   {phases}"
            )

        def ratio_line(
            label: str, ratio: dict[str, float], note: str, conc: int = r["concurrency"]
        ) -> str:
            return (
                f"{conc:>4}  {label:<10} {'':>6} {ratio['p50']:>7.2f}x "
                f"{ratio['p99']:>7.2f}x {ratio['throughput']:>8.2f}x {ratio['cpu']:>6.2f}x "
                f"{ratio.get('server_cpu', float('nan')):>6.2f}x   {note}"
            )

        verdict = "met" if r["target_met"] else "NOT met"
        lines.append(
            ratio_line(
                "ours/bare",
                r["ratio"],
                f"(throughput bare/ours, cpus ours/bare) target <= {report['target']}: {verdict}",
            )
        )
        lines.append(
            ratio_line(
                "floor",
                r["floor_ratio"],
                f"(bare + {report['required_commits']} one-row commits, over bare: no "
                "implementation can beat this here)",
            )
        )
        lines.append(
            ratio_line(
                "floor+emit",
                r["floor_emit_ratio"],
                f"(the floor + this cycle's {report['emissions_per_cycle']} emissions through "
                f"{report['emitter']}, over bare)",
            )
        )
        lines.append(
            ratio_line(
                "stmts",
                r["stmts_ratio"],
                "(bare + the engine's own statements of a cycle, as it writes them, and the "
                "emissions, over bare)",
            )
        )
        lines.append(
            ratio_line(
                "ours/stmts",
                r["ours_over_stmts"],
                "(the engine's orchestration between its statements, and durability=sync)",
            )
        )
        if "dbos_ratio" in r:
            lines.append(ratio_line("dbos/bare", r["dbos_ratio"], ""))
            verdict = "met" if r["dbos_target_met"] else "NOT met"
            lines.append(
                ratio_line("ours/dbos", r["ours_over_dbos"], f"target p50 <= 1: {verdict}")
            )
        lines.append("")
    checks = report["checks"]
    lines.append(
        f"target ours/bare <= {report['target']} at p50 and p99, c=1 and c=16: "
        f"{'met' if report['target_met'] else 'NOT met'}"
    )
    if report["dbos_target_met"] is not None:
        lines.append(
            f"target ours p50 <= dbos p50, c=1 and c=16: "
            f"{'met' if report['dbos_target_met'] else 'NOT met'}"
        )
    lines.append(
        f"check: {checks['side_effects']} side-effect rows for {checks['expected_side_effects']} "
        f"cycles, tool ran once per cycle: {checks['tool_ran_once_per_cycle']}, "
        f"jobs left queued: {checks['jobs_left_queued']}"
    )
    if report["counts_per_cycle"]:
        lines.append("")
        lines.append("per cycle (c=1): statements sent (psycopg async), server commits")
        for v, c in report["counts_per_cycle"].items():
            lines.append(
                f"  {v:<6} statements {c['statements_per_cycle']:>6.2f}   "
                f"commits {c['server_commits_per_cycle']:>6.2f}"
            )
            for text, n in c["statements"].items():
                lines.append(f"      {n:>5.2f}  {text}")
    if report["trace"]:
        lines.append("")
        lines.append(
            "trace (c=1, ms per cycle; op times exclude nested ops; saver writes run in the "
            "background, so ops may overlap each other and the phase's python)"
        )
        for phases in report["trace"].values():
            for name, p in phases.items():
                lines.append(f"  {name:<34} {p['ms_per_cycle']:>8.3f}")
                for label, op in p["ops"].items():
                    lines.append(
                        f"      {label:<40} x{op['per_cycle']:<5} {op['ms_per_cycle']:>8.3f}"
                    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--cycles", type=int, default=200, help="cycles per variant at c=1")
    parser.add_argument("--lanes", type=int, default=16, help="concurrency of the second plan")
    parser.add_argument("--per-lane", type=int, default=25, help="cycles per lane at c=16")
    parser.add_argument("--rounds", type=int, default=40, help="alternating rounds at c=1")
    parser.add_argument("--rounds-c16", type=int, default=5, help="alternating rounds at c=16")
    parser.add_argument("--warmup", type=int, default=20, help="warm-up cycles per variant")
    parser.add_argument("--pool-size", type=int, default=0, help="override pool_max_size")
    parser.add_argument(
        "--bare-durability",
        choices=("async", "sync"),
        default="async",
        help="LangGraph durability of the bare variant (ours always runs sync: a step's "
        "checkpoint is written before the next step starts); default async, LangGraph's own",
    )
    parser.add_argument(
        "--bare-saver",
        choices=("stock", "engine"),
        default="stock",
        help="the checkpointer of bare and the floors: LangGraph's AsyncPostgresSaver as "
        "shipped (default), or the engine's PooledSaver, to see what the saver alone changes",
    )
    parser.add_argument(
        "--resume-path",
        choices=tuple(RESUME_PATHS),
        default="inline",
        help="how ours is resumed: each lane calls Worker.process_one() itself until its own "
        "run has been resumed (inline, default), or worker coroutines beside the lanes, one woken "
        "per decision (workers)",
    )
    parser.add_argument("--no-dbos", action="store_true", help="leave the DBOS variant out")
    parser.add_argument(
        "--count",
        type=int,
        default=0,
        help=f"then count statements and commits over N cycles per variant (c=1; pauses "
        f"{STATS_FLUSH:.0f} s around each, for the server's statistics)",
    )
    parser.add_argument(
        "--trace", type=int, default=0, help="then trace N cycles per variant (DB time by op)"
    )
    parser.add_argument(
        "--pyinstrument", action="store_true", help="with --trace: pyinstrument our cycles"
    )
    parser.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="the event loop every variant runs on: uvloop's (what the approvals commands run"
        " on, web.cli.command.run_loop) or asyncio's own",
    )
    args = parser.parse_args(argv)
    report = run_loop(bench(args)) if args.loop == "uvloop" else asyncio.run(bench(args))
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
