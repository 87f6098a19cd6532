"""HTTP load: 200 approvers decide requests over the API while runs keep pausing.

    python bench/http_load.py [--requests N] [--approvers 200] [--json]

Starts two ``approvals serve`` processes (on two ports: ``serve`` runs one process each) and two
``approvals worker`` processes against one fresh database, then, with an asyncio HTTP client
(httpx):

* starters start refund runs through ``POST /api/v1/runs`` (each pauses on a refund for
  support or finance) until N runs were started;
* 200 approvers (half support, half finance, each with its own token) list their inbox
  (``GET /api/v1/pending``), pick one they may decide at random and approve it (one in ten
  they reject), until N requests were decided; two approvers picking the same one race, and the
  loser's 409 is counted as a lost race, not an error.

It reports decisions/s, p50/p99 per endpoint, errors (transport errors and any status but
200/202, or 409 on a decision), and from the database: decisions per decided request (exactly
one winner), tool executions and side effects per approved call (exactly one) once the workers
resumed every run. Then, with the servers and workers stopped, the raw-PostgreSQL ceiling of the
same decide transaction (``lock_request_row`` + ``decide`` from ``queries.sql``) on as many
connections as the two servers' pools, over synthetic pending requests in the same database.
Targets: 0 errors, one winner per request, one execution per approved call, decide throughput
at least half the raw ceiling. The database is ``APPROVALS_DATABASE_URL`` (an admin URL: a
scratch database is created and dropped) or the embedded server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg.rows import dict_row

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.approval_cycle import scratch_database  # noqa: E402

APPROVALS = str(Path(sys.executable).parent / "approvals")
GROUPS = ("support", "finance")
#: The orders whose refunds the example policy sends to support (25.00) and finance (120.00).
ORDERS = {"support": "1001", "finance": "1002"}
MIN_RATIO = 0.5
#: Connections per server process's pool (and so the raw ceiling's connections, two servers).
POOL = 10


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Load:
    def __init__(self, urls: list[str], requests: int) -> None:
        self.urls = urls
        self.target = requests
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.statuses: dict[str, Counter[int]] = defaultdict(Counter)
        self.errors: list[str] = []
        self.started = 0
        self.decided = 0
        self.lost_races = 0
        self.decide_began: float | None = None
        self.decide_ended: float | None = None

    async def call(
        self, client: httpx.AsyncClient, label: str, method: str, url: str, **kw: Any
    ) -> httpx.Response | None:
        began = time.perf_counter()
        try:
            response = await client.request(method, url, **kw)
        except httpx.HTTPError as exc:
            self.errors.append(f"{label}: {type(exc).__name__} {exc}")
            return None
        self.latency[label].append((time.perf_counter() - began) * 1000)
        self.statuses[label][response.status_code] += 1
        return response

    async def starter(self, client: httpx.AsyncClient, index: int) -> None:
        while self.started < self.target:
            self.started += 1
            group = GROUPS[self.started % 2]
            body = {"graph": "refund", "input": {"message": f"refund {ORDERS[group]}"}}
            url = self.urls[self.started % len(self.urls)] + "/api/v1/runs"
            response = await self.call(client, "POST /api/v1/runs", "POST", url, json=body)
            if response is not None and (
                response.status_code != 200 or response.json().get("status") != "waiting"
            ):
                self.errors.append(f"start: {response.status_code} {response.text[:200]}")

    async def approver(self, client: httpx.AsyncClient, index: int) -> None:
        base = self.urls[index % len(self.urls)]
        rng = random.Random(index)
        while self.decided < self.target:
            listed = await self.call(
                client, "GET /api/v1/pending", "GET", base + "/api/v1/pending?limit=50"
            )
            if listed is None or listed.status_code != 200:
                if listed is not None:
                    self.errors.append(f"list: {listed.status_code} {listed.text[:200]}")
                await asyncio.sleep(0.2)
                continue
            body = listed.json()
            items = body if isinstance(body, list) else body.get("items", [])
            mine = [r["id"] for r in items if r.get("may_decide")]
            if not mine:
                await asyncio.sleep(0.2)
                continue
            request_id = rng.choice(mine)
            verdict: dict[str, Any] = (
                {"decision": "reject", "reason": "bench"}
                if rng.random() < 0.1
                else {"decision": "approve"}
            )
            if self.decide_began is None:
                self.decide_began = time.perf_counter()
            decided = await self.call(
                client,
                "POST /api/v1/pending/{id}/decision",
                "POST",
                f"{base}/api/v1/pending/{request_id}/decision",
                json=verdict,
            )
            if decided is None:
                continue
            if decided.status_code == 200:
                self.decided += 1
                self.decide_ended = time.perf_counter()
            elif decided.status_code == 409:
                self.lost_races += 1  # another approver decided it first: the right answer
            else:
                self.errors.append(f"decide: {decided.status_code} {decided.text[:200]}")

    def endpoints(self) -> dict[str, Any]:
        return {
            label: {
                "calls": len(values),
                "p50_ms": round(statistics.median(values), 1) if values else 0.0,
                "p99_ms": round(percentile(values, 0.99), 1),
                "statuses": {str(k): v for k, v in sorted(self.statuses[label].items())},
            }
            for label, values in sorted(self.latency.items())
        }


async def wait_ready(url: str, proc: asyncio.subprocess.Process, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            if proc.returncode is not None:
                raise SystemExit(f"approvals serve at {url} exited ({proc.returncode})")
            try:
                if (await client.get(url + "/readyz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.2)
    raise SystemExit(f"approvals serve at {url} did not become ready")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def make_principals(url: str, approvers: int) -> tuple[str, list[str]]:
    from web.engine import open_engine
    from web.settings import Settings

    async with open_engine(url, Settings(database_url=url)) as engine:
        shop = await engine.accounts.create_token("shop", ["agents"], "bench", owner=None)
        secrets = []
        for i in range(approvers):
            name, group = f"approver{i:03d}", GROUPS[i % 2]
            await engine.accounts.add_user(name, "bench password, not a secret", [group])
            secrets.append(await engine.accounts.create_token(name, [group], "bench", owner=name))
    return shop, secrets


async def query(url: str, statement: str, *params: Any) -> list[dict[str, Any]]:
    async with await psycopg.AsyncConnection.connect(url, row_factory=dict_row) as conn:
        return await (await conn.execute(statement, params)).fetchall()


async def execute(url: str, statement: str, *params: Any) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(statement, params)


async def wait_drained(url: str, seconds: float) -> int:
    """Until no resume job is queued (the workers resumed every decided run); how many are left."""
    deadline = time.monotonic() + seconds
    while True:
        left = (await query(url, "SELECT count(*) AS n FROM resume_queue WHERE status = 'queued'"))[
            0
        ]["n"]
        if left == 0 or time.monotonic() > deadline:
            return int(left)
        await asyncio.sleep(0.5)


async def checks(url: str) -> dict[str, Any]:
    winners = await query(
        url,
        "SELECT count(*) FILTER (WHERE n = 1) AS one, count(*) FILTER (WHERE n > 1) AS more"
        " FROM (SELECT request_id, count(*) AS n FROM decisions GROUP BY request_id) d",
    )
    decided = await query(
        url,
        "SELECT count(*) AS n FROM approval_requests"
        " WHERE status NOT IN ('pending') AND decided_at IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM decisions d WHERE d.request_id = approval_requests.id)",
    )
    executions = await query(
        url,
        "SELECT count(*) AS approved,"
        " count(*) FILTER (WHERE x.n = 1) AS once, count(*) FILTER (WHERE x.n = 0) AS never,"
        " count(*) FILTER (WHERE x.n > 1) AS more,"
        " count(*) FILTER (WHERE x.effects = 1) AS effect_once,"
        " count(*) FILTER (WHERE x.effects > 1) AS effect_more"
        " FROM (SELECT a.id,"
        "   (SELECT count(*) FROM tool_executions t"
        "     WHERE t.run_id = a.run_id AND t.call_id = a.call_id AND t.status = 'succeeded') AS n,"
        "   (SELECT count(*) FROM demo_side_effects e"
        "     WHERE e.run_id = a.run_id AND e.call_id = a.call_id) AS effects"
        "   FROM approval_requests a WHERE a.status = 'approved') x",
    )
    runs = await query(url, "SELECT status, count(*) AS n FROM runs GROUP BY status")
    return {
        "requests_with_one_winner": winners[0]["one"],
        "requests_with_more_winners": winners[0]["more"],
        "decided_without_decision_row": decided[0]["n"],
        "approved_calls": executions[0]["approved"],
        "executed_once": executions[0]["once"],
        "executed_never": executions[0]["never"],
        "executed_more": executions[0]["more"],
        "side_effect_once": executions[0]["effect_once"],
        "side_effect_more": executions[0]["effect_more"],
        "runs": {r["status"]: r["n"] for r in runs},
    }


async def raw_ceiling(url: str, count: int, connections: int) -> dict[str, Any]:
    """The same decide transaction as PgDecisions.decide (the request's row lock, then the
    one decide statement), straight on psycopg, over ``count`` synthetic pending requests."""
    from storage.queries import QUERIES

    await execute(
        url,
        "INSERT INTO approval_requests (id, run_id, thread_id, call_id, tool, shown, args_schema,"
        " identity, reason, requested_by, expires_at, approvers, shown_digest)"
        " SELECT gen_random_uuid(), a.run_id, a.thread_id, 'raw-' || g, a.tool, a.shown,"
        " a.args_schema, 'raw-' || g, a.reason, a.requested_by, now() + interval '1 day',"
        " a.approvers, a.shown_digest"
        " FROM (SELECT * FROM approval_requests LIMIT 1) a, generate_series(1, %s) g",
        count,
    )
    ids = [
        str(r["id"])
        for r in await query(url, "SELECT id FROM approval_requests WHERE call_id LIKE 'raw-%%'")
    ]
    todo = list(ids)

    async def lane() -> None:
        async with await psycopg.AsyncConnection.connect(
            url, row_factory=dict_row, prepare_threshold=0
        ) as conn:
            while todo:
                request_id = todo.pop()
                async with conn.transaction():
                    await conn.execute(QUERIES["lock_request_row"], {"id": request_id})
                    await conn.execute(
                        QUERIES["decide"],
                        {
                            "id": str(uuid.uuid4()),
                            "request_id": request_id,
                            "status": "approved",
                            "kind": "approve",
                            "principal": "local:raw",
                            "reason": None,
                            "args": None,
                            "args_identity": None,
                            "quorum_met": False,
                            "override_by": None,
                        },
                    )

    began = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(connections)))
    seconds = time.perf_counter() - began
    return {
        "decisions": len(ids),
        "connections": connections,
        "seconds": round(seconds, 2),
        "decisions_per_s": round(len(ids) / seconds, 1),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    async with scratch_database(with_dbos=False) as scratch:
        url, where = scratch.url, scratch.where
        shop, secrets = await make_principals(url, args.approvers)
        env = {k: v for k, v in os.environ.items() if not k.startswith("APPROVALS_")}
        env.update(
            APPROVALS_DATABASE_URL=url,
            APPROVALS_DATA_DIR=str(ROOT / ".approvals" / "http-load"),
            APPROVALS_POOL_MAX_SIZE=str(POOL),
            APPROVALS_LOG_LEVEL="WARNING",
        )
        procs: list[asyncio.subprocess.Process] = []
        try:
            urls = []
            for _ in range(2):
                port = free_port()
                proc = await asyncio.create_subprocess_exec(
                    APPROVALS,
                    "serve",
                    "--port",
                    str(port),
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                procs.append(proc)
                urls.append(f"http://127.0.0.1:{port}")
                await wait_ready(urls[-1], proc)  # one at a time: each migrates at start
            for _ in range(2):
                procs.append(
                    await asyncio.create_subprocess_exec(
                        APPROVALS,
                        "worker",
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
            load = Load(urls, args.requests)
            limits = httpx.Limits(max_connections=args.approvers + args.starters)
            timeout = httpx.Timeout(120)
            began = time.perf_counter()
            async with httpx.AsyncClient(
                headers={"authorization": f"Bearer {shop}"}, limits=limits, timeout=timeout
            ) as agent:
                clients = [
                    httpx.AsyncClient(
                        headers={"authorization": f"Bearer {s}"}, timeout=timeout, limits=limits
                    )
                    for s in secrets
                ]
                try:
                    await asyncio.gather(
                        *(load.starter(agent, i) for i in range(args.starters)),
                        *(load.approver(c, i) for i, c in enumerate(clients)),
                    )
                finally:
                    for c in clients:
                        await c.aclose()
            load_seconds = time.perf_counter() - began
            left = await wait_drained(url, args.drain_seconds)
            drained_seconds = time.perf_counter() - began
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                try:
                    await asyncio.wait_for(proc.wait(), 30)
                except TimeoutError:
                    proc.kill()
        found = await checks(url)
        ceiling = await raw_ceiling(url, min(args.requests, 5000), 2 * POOL)
        decide_seconds = (load.decide_ended or 0.0) - (load.decide_began or 0.0)
        rate = load.decided / decide_seconds if decide_seconds > 0 else 0.0
        errors = len(load.errors)
        report = {
            "database": where,
            "requests": args.requests,
            "approvers": args.approvers,
            "servers": len(urls),
            "workers": 2,
            "runs_started": load.started,
            "decided": load.decided,
            "lost_races": load.lost_races,
            "errors": errors,
            "error_samples": load.errors[:5],
            "load_seconds": round(load_seconds, 1),
            "drained_seconds": round(drained_seconds, 1),
            "jobs_left_queued": left,
            "decisions_per_s": round(rate, 1),
            "endpoints": load.endpoints(),
            "database_checks": found,
            "raw_ceiling": ceiling,
            "ratio_to_ceiling": round(rate / ceiling["decisions_per_s"], 3),
        }
        report["targets"] = {
            "zero_errors": errors == 0,
            "one_winner_per_request": found["requests_with_more_winners"] == 0,
            "one_execution_per_approved_call": found["approved_calls"] == found["executed_once"]
            and found["side_effect_more"] == 0
            and left == 0,
            "at_least_half_the_raw_ceiling": report["ratio_to_ceiling"] >= MIN_RATIO,
        }
        return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--approvers", type=int, default=200)
    parser.add_argument("--starters", type=int, default=8)
    parser.add_argument("--drain-seconds", type=float, default=1800)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.requests < 1 or args.approvers < 2 or args.starters < 1:
        parser.error("--requests must be at least 1, --approvers 2, --starters 1")
    report = asyncio.run(run(args))
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"http load: {report['decided']} decisions by {report['approvers']} approvers over"
        f" {report['servers']} servers, {report['workers']} workers ({report['database']})"
    )
    print(
        f"  {report['runs_started']} runs started, load {report['load_seconds']} s,"
        f" all resumed after {report['drained_seconds']} s"
    )
    print(f"  decisions/s: {report['decisions_per_s']}  (lost races, 409: {report['lost_races']})")
    raw = report["raw_ceiling"]
    print(
        f"  raw ceiling: {raw['decisions_per_s']} decisions/s on {raw['connections']}"
        f" connections; ratio {report['ratio_to_ceiling']} (target >= {MIN_RATIO})"
    )
    print(f"  errors: {report['errors']} {report['error_samples']}")
    for label, e in report["endpoints"].items():
        print(
            f"  {label:<36} {e['calls']:>7} calls  p50 {e['p50_ms']:>7} ms  p99 {e['p99_ms']:>7} ms"
        )
    print(f"  database: {json.dumps(report['database_checks'])}")
    for name, ok in report["targets"].items():
        print(f"  {'PASS' if ok else 'FAIL'} {name}")


if __name__ == "__main__":
    main()
