"""Rounds and their statistics for ``bench/approval_cycle.py``: samples, percentiles, the CPU of
this process and of the database server's backends, ratios, and (``--count``) statements and
commits per cycle."""

from __future__ import annotations

import asyncio
import gc
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Sample:
    total: float
    phases: dict[str, float]


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
