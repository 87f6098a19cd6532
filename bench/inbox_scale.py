"""The inbox at scale: a million pending requests, paged over HTTP by an approver and an operator.

    python -m bench.inbox_scale [--rows N] [--json]

Creates a scratch database on ``APPROVALS_TEST_DATABASE_URL``'s server (or
``APPROVALS_DATABASE_URL``'s), migrates it, and loads ``--rows`` pending requests (default
1,000,000) with COPY, over 20 approver groups (one each, a tenth of them two) and ``--runs``
runs (default 100,000), then VACUUM ANALYZE, as a database that has been running would be.
The app is served by uvicorn on a loopback port, in this process (its own thread and event
loop); the client is httpx, one request at a time, with bearer tokens.

It measures ``GET /api/v1/pending`` for an approver of one group (``scope=decide``) and for an
operator (every request):

* first page: the default page (50 rows, soonest deadline first);
* cursor page: a page deep in the listing, fetched by the cursor the previous page's ``Link``
  header gave (the approver's around its page 200, the operator's around its page 2,000);
* counts: per approver group, as the database computes them (no target: one GROUP BY over
  every visible pending request), and ``GET /api/v1/pending/counts``, which shares a count
  for up to 5 s among those who see the same requests.

p50 and p99 over ``--samples`` requests each (after a warm-up). Then the approver follows the
``Link`` headers from the first page to the last, at 500 rows a page, and the ids it was shown
are compared with every request its group may decide, read straight from the table.

Targets at 1,000,000 requests on a 2-core machine: first page p99 <= 20 ms, cursor page p99 <=
30 ms, and the approver reaches every request it may decide. The database is dropped at the
end. Exit status 0 whether or not a target is met: this is a bench.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import random
import socket
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import uvicorn
from psycopg.types.json import Jsonb

from approvals.identity import shown_digest
from approvals.principals import Principal
from storage.migrate import upgrade
from web.app import create_app
from web.engine import open_engine
from web.serving import server_config
from web.settings import Settings

GROUPS = tuple(f"team-{i:02d}" for i in range(20))
TOOLS = ("issue_refund", "send_email", "delete_record", "transfer_funds", "grant_access")
#: The approver the bench pages as: a member of one group.
APPROVER_GROUP = GROUPS[3]
OPERATOR_GROUP = "operators"
FIRST_PAGE_P99_MS = 20.0
CURSOR_PAGE_P99_MS = 30.0
PASSWORD = "bench password, not a secret"  # noqa: S105 - the bench's throwaway accounts


#: The columns ``request_rows`` fills, in order.
COPY_REQUESTS = (
    "COPY approval_requests (id, run_id, thread_id, call_id, tool, shown, args_schema,"
    " identity, reason, requested_by, requested_by_person, created_at, expires_at, approvers,"
    " shown_digest) FROM STDIN"
)


@dataclass(frozen=True)
class Loaded:
    rows: int
    runs: int
    seconds: float


def _runs(count: int, rng: random.Random) -> Iterator[tuple[Any, ...]]:
    for i in range(count):
        run_id = uuid.UUID(int=rng.getrandbits(128), version=4)
        yield (run_id, f"bench-thread-{i}", "bench", "waiting", f"local:starter-{i % 500}")


def request_rows(
    count: int,
    run_ids: list[tuple[uuid.UUID, str]],
    rng: random.Random,
    now: datetime,
    *,
    calls: str = "call-",
) -> Iterator[tuple[Any, ...]]:
    """``count`` pending requests over ``run_ids`` (run id, starter), as ``COPY_REQUESTS``'s
    rows (call ids ``calls`` + a number): one or two random groups each, asked up to a day
    before ``now``, due within a week. Their shown copies' digests are right, so they are
    listed as intact."""
    for i in range(count):
        run_id, starter = run_ids[i % len(run_ids)]
        groups = [rng.choice(GROUPS)]
        if rng.random() < 0.1:
            other = rng.choice(GROUPS)
            if other != groups[0]:
                groups.append(other)
        tool = TOOLS[i % len(TOOLS)]
        call_id = f"{calls}{i}"
        shown = {
            "tool": tool,
            "description": f"{tool} as the agent proposed it",
            "args": {"order": f"order-{i}", "amount": (i * 37) % 5000},
        }
        digest = shown_digest(run_id=str(run_id), call_id=call_id, tool=tool, shown=shown)
        identity = "jcs-sha256:" + hashlib.sha256(f"{run_id}:{call_id}".encode()).hexdigest()
        created = now - timedelta(seconds=rng.uniform(0, 86400))
        expires = now + timedelta(seconds=rng.uniform(3600, 7 * 86400))
        yield (
            uuid.UUID(int=rng.getrandbits(128), version=4),
            run_id,
            f"bench-thread-{i % len(run_ids)}",
            call_id,
            tool,
            Jsonb(shown),
            Jsonb({"type": "object"}),
            identity,
            "sensitive tool",
            starter,
            starter,
            created,
            expires,
            groups,
            digest,
        )


async def load_requests(url: str, *, rows: int, runs: int, seed: int = 15) -> Loaded:
    """Load ``rows`` pending requests over ``runs`` runs (and 20 approver groups) into the
    migrated database at ``url`` with COPY, then VACUUM ANALYZE. Deterministic for a seed."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    started = time.perf_counter()
    async with await psycopg.AsyncConnection.connect(url) as conn:
        # Loaded rows are not events: no trigger fires (no request NOTIFY for a million rows,
        # no foreign-key check per row; the runs are loaded first all the same).
        await conn.execute("SET session_replication_role = replica")
        run_rows = list(_runs(runs, rng))
        async with conn.cursor() as cur:
            async with cur.copy(
                "COPY runs (id, thread_id, graph, status, started_by, input) FROM STDIN"
            ) as copy:
                for run in run_rows:
                    await copy.write_row((*run, Jsonb({})))
            async with cur.copy(COPY_REQUESTS) as copy:
                pairs = [(r[0], r[4]) for r in run_rows]
                for row in request_rows(rows, pairs, rng, now):
                    await copy.write_row(row)
        await conn.commit()
        await conn.set_autocommit(True)
        await conn.execute("VACUUM ANALYZE runs")
        await conn.execute("VACUUM ANALYZE approval_requests")
    return Loaded(rows=rows, runs=runs, seconds=time.perf_counter() - started)


def _with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _timed(client: httpx.Client, url: str, token: str, samples: int) -> dict[str, float]:
    headers = {"authorization": f"Bearer {token}"}
    for _ in range(max(5, samples // 10)):
        client.get(url, headers=headers).raise_for_status()
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        response = client.get(url, headers=headers)
        times.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    return {
        "p50_ms": round(statistics.median(times), 2),
        "p99_ms": round(_percentile(times, 0.99), 2),
        "samples": samples,
    }


def _next(response: httpx.Response) -> str | None:
    link = response.links.get("next")
    return link["url"] if link else None


def _deep_url(client: httpx.Client, first: str, token: str, depth: int) -> tuple[str, int]:
    """The URL of the page ``depth`` pages in (or the last one), following ``Link`` headers
    with big pages and then asking the next one at the default size."""
    headers = {"authorization": f"Bearer {token}"}
    # 500-row pages to get there quickly: the cursor of row (depth * 50) is the same one.
    url: str | None = first.replace("limit=50", "limit=500")
    last = first
    pages = 0
    while url is not None and pages < depth // 10:
        last = url
        response = client.get(url, headers=headers)
        response.raise_for_status()
        url = _next(response)
        pages += 1
    target = url or last
    return target.replace("limit=500", "limit=50"), pages * 10


def _follow(client: httpx.Client, first: str, token: str) -> tuple[list[str], int]:
    headers = {"authorization": f"Bearer {token}"}
    url: str | None = first
    seen: list[str] = []
    pages = 0
    while url is not None:
        response = client.get(url, headers=headers)
        response.raise_for_status()
        seen.extend(item["id"] for item in response.json())
        url = _next(response)
        pages += 1
    return seen, pages


class _Server:
    """The app under uvicorn on a loopback port, in a thread with its own event loop."""

    def __init__(self, settings: Settings) -> None:
        # IPPROTO_TCP, as getaddrinfo gives uvicorn's own sockets: asyncio turns Nagle off
        # only on sockets that say so, and with Nagle on every response waits for the
        # client's delayed ACK (40 ms on Linux).
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        app = create_app(settings.model_copy(update={"public_url": self.url}), migrate=False)
        self.server = uvicorn.Server(server_config(app, settings))
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> _Server:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the web server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        self.sock.close()


async def _tokens(url: str, settings: Settings) -> tuple[str, str]:
    async with open_engine(url, settings) as engine:
        await engine.accounts.add_user("approver", PASSWORD, [APPROVER_GROUP])
        await engine.accounts.add_user("operator", PASSWORD, [OPERATOR_GROUP])
        approver = await engine.accounts.create_token(
            "approver-token", [APPROVER_GROUP], "bench", owner="approver"
        )
        operator = await engine.accounts.create_token(
            "operator-token", [OPERATOR_GROUP], "bench", owner="operator"
        )
    return approver, operator


async def _count_queries(url: str, settings: Settings, samples: int) -> dict[str, Any]:
    """The counts per group as the database computes them (what the HTTP answer caches)."""
    timed: dict[str, Any] = {}
    async with open_engine(url, settings) as engine:
        for who, groups in (("approver", {APPROVER_GROUP}), ("operator", {OPERATOR_GROUP})):
            viewer = engine.viewer(Principal.local(who, frozenset(groups)))
            times = []
            for _ in range(samples):
                started = time.perf_counter()
                await engine.requests.pending_counts(viewer)
                times.append((time.perf_counter() - started) * 1000)
            timed[who] = {
                "p50_ms": round(statistics.median(times), 2),
                "p99_ms": round(_percentile(times, 0.99), 2),
                "samples": samples,
            }
    return timed


async def _decidable(url: str) -> set[str]:
    """Every request the approver may decide, straight from the table."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "SELECT id::text FROM approval_requests"
            " WHERE status = 'pending' AND %s = ANY(approvers)"
            " AND requested_by <> 'local:approver'",
            (APPROVER_GROUP,),
        )
        return {row[0] for row in await cur.fetchall()}


def measure(url: str, settings: Settings, tokens: tuple[str, str], samples: int) -> dict[str, Any]:
    approver, operator = tokens
    first_approver = "/api/v1/pending?limit=50&scope=decide"
    first_operator = "/api/v1/pending?limit=50"
    results: dict[str, Any] = {}
    with _Server(settings) as server, httpx.Client(base_url=server.url, timeout=120) as client:
        for who, token, first, depth in (
            ("approver", approver, first_approver, 200),
            ("operator", operator, first_operator, 2000),
        ):
            deep, reached = _deep_url(client, first, token, depth)
            results[who] = {
                "first_page": _timed(client, first, token, samples),
                "cursor_page": _timed(client, deep, token, samples) | {"page": reached + 1},
                # Shared for up to 5 s by whoever sees the same requests: mostly cache hits.
                "counts_http": _timed(
                    client, "/api/v1/pending/counts", token, max(5, samples // 10)
                ),
            }
        started = time.perf_counter()
        seen, pages = _follow(client, "/api/v1/pending?limit=500&scope=decide", approver)
        results["approver_walk"] = {
            "pages": pages,
            "shown": len(seen),
            "distinct": len(set(seen)),
            "seconds": round(time.perf_counter() - started, 2),
            "ids": seen,
        }
    return results


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    server_url = os.environ.get("APPROVALS_TEST_DATABASE_URL") or os.environ.get(
        "APPROVALS_DATABASE_URL"
    )
    if not server_url:
        raise SystemExit("set APPROVALS_TEST_DATABASE_URL to a PostgreSQL server admin URL")
    name = f"approvals_inbox_bench_{os.getpid()}"
    admin = await psycopg.AsyncConnection.connect(server_url, autocommit=True)
    await admin.execute(f"DROP DATABASE IF EXISTS {name}")
    await admin.execute(f"CREATE DATABASE {name}")
    url = _with_database(server_url, name)
    try:
        await upgrade(url)
        loaded = await load_requests(url, rows=args.rows, runs=args.runs)
        settings = Settings(
            database_url=url,
            data_dir=Path(args.data_dir),
            config_file=Path(args.data_dir) / "none.toml",
            secret_key="inbox-bench-" + "k" * 32,
            operator_group=OPERATOR_GROUP,
        )
        tokens = await _tokens(url, settings)
        expected = await _decidable(url)
        results = await asyncio.to_thread(measure, url, settings, tokens, args.samples)
        counted = await _count_queries(url, settings, max(5, args.samples // 10))
        for who in ("approver", "operator"):
            results[who]["counts_query"] = counted[who]
    finally:
        if args.keep:
            print(f"kept the database {name}", file=sys.stderr)
        else:
            await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()
    walk = results["approver_walk"]
    seen = walk.pop("ids")
    walk["expected"] = len(expected)
    walk["reached_every_request"] = set(seen) == expected and len(seen) == len(expected)
    first_p99 = max(results[w]["first_page"]["p99_ms"] for w in ("approver", "operator"))
    cursor_p99 = max(results[w]["cursor_page"]["p99_ms"] for w in ("approver", "operator"))
    return {
        "rows": loaded.rows,
        "runs": loaded.runs,
        "groups": len(GROUPS),
        "load_seconds": round(loaded.seconds, 1),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        **results,
        "targets": {
            "first_page_p99_ms": FIRST_PAGE_P99_MS,
            "cursor_page_p99_ms": CURSOR_PAGE_P99_MS,
            "first_page_met": first_p99 <= FIRST_PAGE_P99_MS,
            "cursor_page_met": cursor_p99 <= CURSOR_PAGE_P99_MS,
            "approver_reached_every_request": walk["reached_every_request"],
        },
    }


def report(result: dict[str, Any]) -> str:
    lines = [
        f"{result['rows']:,} pending requests over {result['groups']} groups and"
        f" {result['runs']:,} runs (loaded in {result['load_seconds']} s),"
        f" {result['machine']['cpus']} CPUs",
    ]
    for who in ("approver", "operator"):
        r = result[who]
        lines.append(
            f"{who:9} first page p50 {r['first_page']['p50_ms']:6.2f} ms"
            f"  p99 {r['first_page']['p99_ms']:6.2f} ms"
            f" | cursor page {r['cursor_page']['page']:>5}: p50 {r['cursor_page']['p50_ms']:6.2f}"
            f" ms  p99 {r['cursor_page']['p99_ms']:6.2f} ms"
            f" | counts query p50 {r['counts_query']['p50_ms']:7.2f} ms"
            f" (HTTP, shared 5 s: {r['counts_http']['p50_ms']:.2f} ms)"
        )
    walk = result["approver_walk"]
    lines.append(
        f"approver walk: {walk['shown']:,} shown ({walk['distinct']:,} distinct) of"
        f" {walk['expected']:,} it may decide, {walk['pages']} pages, {walk['seconds']} s"
    )
    t = result["targets"]
    lines.append(
        f"targets: first page p99 <= {t['first_page_p99_ms']} ms:"
        f" {'met' if t['first_page_met'] else 'MISSED'}; cursor page p99 <="
        f" {t['cursor_page_p99_ms']} ms: {'met' if t['cursor_page_met'] else 'MISSED'};"
        f" every request reached: {'yes' if t['approver_reached_every_request'] else 'NO'}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="pending requests to load")
    parser.add_argument("--runs", type=int, default=None, help="runs (default rows / 10)")
    parser.add_argument("--samples", type=int, default=200, help="requests per measurement")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--data-dir", default=".approvals/inbox-bench")
    parser.add_argument("--keep", action="store_true", help="keep the database (to explain)")
    args = parser.parse_args(argv)
    if args.rows < 1:
        parser.error("--rows must be at least 1")
    if args.runs is None:
        args.runs = max(1, args.rows // 10)
    result = asyncio.run(main_async(args))
    print(json.dumps(result, indent=2) if args.json else report(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
