"""Storage per finished run: bytes in tables, indexes and WAL, ours and LangGraph's, before and
after retention.

    python bench/storage_bytes.py [--runs N] [--rounds R] [--json]

A scratch database ``approvals_storage_<pid>`` is created on the server of
``APPROVALS_TEST_DATABASE_URL`` (else ``APPROVALS_DATABASE_URL``, else the embedded server in
``.approvals/bench-pg``), migrated, measured and dropped.

Each round runs N approval cycles the way the engine runs them, in process: ``engine.start_run``
(the refund example pauses on its ``issue_refund`` call), ``engine.decide`` by a signed-in
approver of the ``support`` group, ``engine.drain`` (the worker resumes the run, the tool runs
once through the ledger, the run completes). Then a second later, ``engine.prune`` with a one
second age (``approvals retention prune --older-than 1s``), then a plain ``VACUUM`` of every
table (what autovacuum does), and the next round.

* before retention: what round 1's runs added, per run: ``pg_total_relation_size`` growth of
  every table (heap and TOAST apart from indexes), grouped as ours (the engine's tables),
  LangGraph's (``checkpoints``, ``checkpoint_blobs``, ``checkpoint_writes``,
  ``checkpoint_migrations``) and the examples' (``demo_side_effects``, the refund tool's own
  log, which retention does not touch), and WAL bytes (``pg_current_wal_lsn`` difference).
* after retention: what stays per run once every run was pruned: the tables compacted
  (``VACUUM FULL``, on the scratch database only) against the same tables compacted when
  empty, over all R x N runs. What stays is the decision log (``audit_events``), by design.
* per round: the disk size of each group after the round's prune and vacuum. Bounded means it
  levels off but for the decision log: later rounds reuse the freed pages. It takes a round or
  two to level (VACUUM hands back the empty pages at a table's end, and an index reuses its
  emptied pages only after a second VACUUM), so ``bounded`` compares the last round with the
  one before it, beside what one round of runs writes before retention.

WAL is counted for this database alone where the server allows it (a superuser connection and
the ``pg_walinspect`` extension): the records that touch the scratch database's blocks, and the
commit records of the transactions that wrote them, read from a temporary replication slot that
keeps the round's WAL until it is read. Elsewhere it falls back to the ``pg_current_wal_lsn``
difference, which counts every other database's writes on the same server too (``wal_scope``
says which). Exit status 0: this is a bench, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
LANGGRAPH = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")
EXAMPLES = ("demo_side_effects",)
GROUPS = ("ours", "langgraph", "examples")
MESSAGE = "Please refund order 1001"

# Every table of the schema with its sizes: heap (main, TOAST, free space and visibility maps)
# apart from its indexes; total = pg_total_relation_size.
SIZES = """
SELECT c.relname AS name, pg_table_size(c.oid) AS heap, pg_indexes_size(c.oid) AS indexes,
       pg_total_relation_size(c.oid) AS total
  FROM pg_class c
 WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
 ORDER BY c.relname
"""


# The WAL records that touch this database's blocks ("rel TABLESPACE/DATABASE/RELATION"), and
# the records without blocks (commits) of the transactions that wrote any of them.
WAL_OF_THIS_DATABASE = """
WITH here AS (
    SELECT 'rel [0-9]+/' || oid || '/' AS pattern
      FROM pg_database WHERE datname = current_database()
), records AS (
    SELECT r.xid, r.record_length, r.block_ref IS NULL AS blockless,
           COALESCE(r.block_ref ~ (SELECT pattern FROM here), false) AS mine
      FROM pg_get_wal_records_info(%(since)s::pg_lsn, %(until)s::pg_lsn) r
), writers AS (
    SELECT DISTINCT xid FROM records WHERE mine AND xid::text <> '0'
)
SELECT sum(record_length)
  FROM records
 WHERE mine OR (blockless AND xid IN (SELECT xid FROM writers))
"""


def group_of(table: str) -> str:
    if table in LANGGRAPH:
        return "langgraph"
    if table in EXAMPLES:
        return "examples"
    return "ours"


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


async def admin(url: str, statement: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(statement)


@asynccontextmanager
async def scratch_database() -> AsyncIterator[tuple[str, str]]:
    from storage.migrate import upgrade

    where = "APPROVALS_TEST_DATABASE_URL"
    admin_url = os.environ.get(where)
    if not admin_url:
        where = "APPROVALS_DATABASE_URL"
        admin_url = os.environ.get(where)
    if not admin_url:
        from storage.embedded import start_embedded

        data_dir = ROOT / ".approvals" / "bench-pg"
        admin_url = await asyncio.to_thread(start_embedded, data_dir)
        where = f"embedded ({data_dir})"
    name = f"approvals_storage_{os.getpid()}"
    await admin(admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    await admin(admin_url, f"CREATE DATABASE {name}")
    try:
        url = with_database(admin_url, name)
        await upgrade(url)
        yield url, f"{where}, scratch database {name}"
    finally:
        await admin(admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


class Probe:
    """Reads sizes, row counts and the WAL position on a connection of its own (autocommit,
    so VACUUM may run on it)."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self._conn = conn
        self._slot: str | None = None

    async def tables(self) -> list[str]:
        cur = await self._conn.execute(SIZES)
        return [row[0] for row in await cur.fetchall()]

    async def sizes(self) -> dict[str, dict[str, int]]:
        cur = await self._conn.execute(SIZES)
        sizes = {
            name: {"heap": int(heap), "indexes": int(indexes), "total": int(total)}
            for name, heap, indexes, total in await cur.fetchall()
        }
        for name in sizes:
            counted = await self._conn.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(name))
            )
            row = await counted.fetchone()
            sizes[name]["rows"] = int(row[0]) if row else 0
        return sizes

    async def wal(self) -> str:
        """The WAL position now (flushed: what the reader may read up to)."""
        cur = await self._conn.execute("SELECT pg_current_wal_flush_lsn()::text")
        row = await cur.fetchone()
        assert row is not None
        return str(row[0])

    async def scope_wal(self, slot: str) -> str:
        """Count WAL for this database alone if the server lets us; says which scope holds."""
        try:
            await self._conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
            await self._conn.execute(
                "SELECT pg_create_physical_replication_slot(%s, true, true)", (slot,)
            )
        except psycopg.Error as exc:
            print(f"WAL counted server-wide: {exc}".strip(), file=sys.stderr)
            self._slot = None
            return "server (every database on it)"
        self._slot = slot
        return "this database (pg_walinspect)"

    async def wal_bytes(self, since: str) -> int:
        """WAL written since ``since``: this database's records (and the commit records of the
        transactions that wrote them) when scoped, else the whole server's."""
        until = await self.wal()
        if self._slot is None:
            cur = await self._conn.execute(
                "SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)", (until, since)
            )
        else:
            cur = await self._conn.execute(WAL_OF_THIS_DATABASE, {"since": since, "until": until})
        row = await cur.fetchone()
        assert row is not None
        if self._slot is not None:
            # Read: let the server recycle it.
            await self._conn.execute(
                "SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (self._slot, until)
            )
        return int(row[0] or 0)

    async def vacuum(self, *, full: bool = False) -> None:
        names = sql.SQL(", ").join(sql.Identifier(name) for name in await self.tables())
        verb = sql.SQL("VACUUM FULL" if full else "VACUUM")
        await self._conn.execute(sql.SQL("{} {}").format(verb, names))


def growth(
    after: dict[str, dict[str, int]], before: dict[str, dict[str, int]], runs: int
) -> dict[str, Any]:
    """Per table and per group: bytes (heap, indexes, total) and rows added per run."""
    tables: dict[str, dict[str, float]] = {}
    for name, now in after.items():
        then = before.get(name, {"heap": 0, "indexes": 0, "total": 0, "rows": 0})
        tables[name] = {k: round((now[k] - then[k]) / runs, 1) for k in now}
    groups = {
        g: {
            k: round(sum(t[k] for name, t in tables.items() if group_of(name) == g), 1)
            for k in ("heap", "indexes", "total")
        }
        for g in GROUPS
    }
    return {"groups": groups, "tables": tables}


def disk(sizes: dict[str, dict[str, int]]) -> dict[str, int]:
    """Bytes on disk per group, with the decision log apart from the rest of ours."""
    out = {g: sum(s["total"] for n, s in sizes.items() if group_of(n) == g) for g in GROUPS}
    out["audit_events"] = sizes.get("audit_events", {"total": 0})["total"]
    out["ours_without_audit"] = out["ours"] - out["audit_events"]
    return out


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    from approvals.principals import Principal, Via
    from web.engine import open_engine
    from web.settings import Settings

    starter = Principal(id="local:shop", name="shop", via=Via.PASSWORD, groups=frozenset())
    approver = Principal(
        id="local:lead", name="lead", via=Via.PASSWORD, groups=frozenset({"support"})
    )
    async with scratch_database() as (url, where):
        with tempfile.TemporaryDirectory() as tmp:
            settings = Settings(
                database_url=url,
                data_dir=Path(tmp),
                config_file=Path(tmp) / "none.toml",
                examples=True,
            )
            async with (
                open_engine(url, settings) as engine,
                await psycopg.AsyncConnection.connect(url, autocommit=True) as conn,
            ):
                probe = Probe(conn)
                wal_scope = await probe.scope_wal(f"approvals_storage_{os.getpid()}")
                await probe.vacuum(full=True)
                compact_empty = await probe.sizes()

                async def cycle() -> None:
                    run = await engine.start_run("refund", {"message": MESSAGE}, principal=starter)
                    assert run.status == "waiting", run
                    await engine.decide(run.pending[0], "approve", principal=approver)
                    resumed = await engine.drain()
                    assert resumed == 1, resumed

                await cycle()  # warm-up: imports, plan caches, the pool; pruned in round 1
                start = await probe.sizes()
                rounds: list[dict[str, Any]] = []
                before_retention: dict[str, Any] = {}
                for r in range(args.rounds):
                    sizes_then, wal_then = await probe.sizes(), await probe.wal()
                    began = time.perf_counter()
                    for _ in range(args.runs):
                        await cycle()
                    seconds = time.perf_counter() - began
                    wal = await probe.wal_bytes(wal_then)
                    grown = await probe.sizes()
                    if r == 0:
                        before_retention = growth(grown, start, args.runs)
                        before_retention["wal"] = round(wal / args.runs, 1)
                    await asyncio.sleep(1.1)  # every run of the round ended over a second ago
                    wal_then = await probe.wal()
                    began_prune = time.perf_counter()
                    pruned = await engine.prune(timedelta(seconds=1), principal="bench")
                    prune_seconds = time.perf_counter() - began_prune
                    prune_wal = await probe.wal_bytes(wal_then)
                    await probe.vacuum()
                    after = await probe.sizes()
                    rounds.append(
                        {
                            "round": r + 1,
                            "cycles_per_s": round(args.runs / seconds, 1),
                            "grown_per_run": growth(grown, sizes_then, args.runs)["groups"],
                            "wal_per_run": round(wal / args.runs, 1),
                            "pruned": pruned.to_json(),
                            "prune_seconds": round(prune_seconds, 3),
                            "prune_wal_per_run": round(prune_wal / args.runs, 1),
                            "disk_after_prune_and_vacuum": disk(after),
                            "rows_left": {
                                n: s["rows"]
                                for n, s in after.items()
                                if s["rows"] and n not in ("alembic_version",)
                            },
                        }
                    )
                await probe.vacuum(full=True)
                compact_end = await probe.sizes()
    total_runs = args.rounds * args.runs + 1
    after_retention = growth(compact_end, compact_empty, total_runs)
    wals = [r["wal_per_run"] for r in rounds]
    ours_disk = [r["disk_after_prune_and_vacuum"]["ours_without_audit"] for r in rounds]
    langgraph_disk = [r["disk_after_prune_and_vacuum"]["langgraph"] for r in rounds]
    return {
        "bench": "storage_bytes",
        "database": where,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "runs_per_round": args.runs,
        "rounds": args.rounds,
        "before_retention_per_run": before_retention,
        "after_retention_per_run": after_retention,
        "wal_scope": wal_scope,
        "wal_per_run": {"min": min(wals), "median": statistics.median(wals), "rounds": wals},
        "rounds_detail": rounds,
        # Bounded: ours (but the log) and LangGraph's level off once retention runs.
        "bounded": {
            "ours_without_audit_growth_last_round": ours_disk[-1]
            - ours_disk[max(0, len(rounds) - 2)],
            "langgraph_growth_last_round": langgraph_disk[-1]
            - langgraph_disk[max(0, len(rounds) - 2)],
            "one_round_of_runs_before_retention": round(
                before_retention["groups"]["ours"]["total"] * args.runs
                + before_retention["groups"]["langgraph"]["total"] * args.runs
            ),
        },
    }


def render(report: dict[str, Any]) -> str:
    before = report["before_retention_per_run"]
    after = report["after_retention_per_run"]
    lines = [
        f"storage per finished run ({report['runs_per_round']} runs x {report['rounds']}"
        f" rounds; {report['database']})",
        "",
        f"  {'bytes per run':<28}{'heap':>10}{'indexes':>10}{'total':>10}",
    ]
    for label, figures in (("before retention", before), ("after retention", after)):
        for g in GROUPS:
            s = figures["groups"][g]
            name = f"{label}: {g}"
            lines.append(f"  {name:<28}{s['heap']:>10.0f}{s['indexes']:>10.0f}{s['total']:>10.0f}")
    lines.append(
        f"  {'WAL (before retention)':<28}{'':>10}{'':>10}{before['wal']:>10.0f}"
        f"   (min over rounds {report['wal_per_run']['min']:.0f}; {report['wal_scope']})"
    )
    lines += ["", "  largest tables before retention (bytes per run, total):"]
    largest = sorted(before["tables"].items(), key=lambda kv: -kv[1]["total"])[:8]
    for name, s in largest:
        lines.append(f"    {name:<30}{s['total']:>10.0f}  ({s['rows']:.1f} rows)")
    lines += ["", "  what stays after retention (bytes per run, compacted):"]
    for name, s in sorted(after["tables"].items(), key=lambda kv: -kv[1]["total"]):
        if s["total"] > 0 or s["rows"] > 0:
            lines.append(f"    {name:<30}{s['total']:>10.0f}  ({s['rows']:.1f} rows)")
    lines += ["", "  disk after each round's prune + VACUUM (bytes):"]
    for r in report["rounds_detail"]:
        d = r["disk_after_prune_and_vacuum"]
        lines.append(
            f"    round {r['round']}: ours w/o audit {d['ours_without_audit']:>10},"
            f" audit_events {d['audit_events']:>10}, langgraph {d['langgraph']:>10};"
            f" pruned {r['pruned']['runs']} runs, {r['pruned']['rows']} rows in"
            f" {r['prune_seconds']:.2f}s; {r['cycles_per_s']} cycles/s"
        )
    b = report["bounded"]
    lines.append(
        f"  growth over the last round: ours w/o audit {b['ours_without_audit_growth_last_round']},"
        f" langgraph {b['langgraph_growth_last_round']}"
        f" (one round's runs held {b['one_round_of_runs_before_retention']} bytes)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--runs", type=int, default=200, help="approval cycles per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of cycles and retention")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.rounds < 1:
        parser.error("--runs and --rounds must be at least 1")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    report = asyncio.run(bench(args))
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
