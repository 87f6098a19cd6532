"""HTTP load: 200 approvers decide a backlog of requests over the API while runs keep pausing.

    python bench/http_load.py [--requests N] [--approvers 200] [--json]

Two ``approvals serve`` processes (``serve`` runs one process each, so two ports) and two
``approvals worker`` processes on one fresh database, all running the code beside this file:

1. **Backlog.** N refund runs are paused in this process through ``Engine.start_run`` on
   several concurrent tasks (no HTTP, no server running: how fast runs start is not what this
   bench measures, so it is timed apart). Each pauses on one refund that support or finance
   must decide.
2. **Raw ceiling, before.** The same transaction as ``PgDecisions.decide``
   (``lock_request_row``, then ``decide``, from ``storage/sql/requests.sql``) straight on psycopg,
   on as many connections as the two servers' pools, over copies of backlog requests on their real
   runs; then the same through ``Engine.decide`` in this process (token lookup, visibility, rules,
   the transaction: no HTTP). The copies' resume jobs are set aside (``skipped``).
3. **Idle probe.** With the servers up and nothing else running, one client at a time:
   ``/healthz``, the inbox listing and decisions over HTTP, and decisions in-process, so a
   decision's server time and its HTTP overhead can be told apart.
4. **Decide.** The workers start. The approvers (real accounts, half support and half
   finance, each with its own token) list their inbox (``GET /api/v1/pending``, the first
   page, ``scope=decide`` where the server pages) and decide the requests on it that they may
   decide, in random order, until every request of the backlog is decided; nine in ten approve,
   one rejects. Meanwhile agents keep starting runs through ``POST /api/v1/runs`` at a low
   steady rate (their requests are decided too), and the workers resume what was decided. A
   request this bench saw decided is not tried again from an older listing (the stand-in for
   the inbox's live updates), but two approvers can still reach one request at once: the
   loser's 409 is a lost race, counted, not an error.
5. **Check.** Once the workers resumed everything, the database says how many decisions each
   request has (exactly one), and for each approved call how many ledger rows
   (``tool_executions``) and side effects (``demo_side_effects``) it has (exactly one; none for
   a rejected one). Then, with every process stopped, the raw ceiling again.
6. **Floors.** The bare HTTP floor (``bench/bare_http.py``: HTTP, Python and the raw
   transaction, nothing of the engine); the bare workload floor (the decide phase's own
   approvers, page size, order and lost races against ``bench/bare_http.py`` answering the
   inbox with its own statement and the decision with the raw transaction, over as many copies
   of backlog requests, with no workers and no runs started: the most this workload can get
   out of these cores with nothing of the engine, even with every resume left for later);
   and what a bare LangGraph resume of the same agent
   shape costs in CPU (``bench/approval_cycle.py``'s bare variant, in this process). The CPU
   floor is the machine's cores over the CPU of one bare HTTP decision plus one bare resume:
   no implementation whose workers resume the decided runs on these cores during the decide
   phase can decide faster, whatever the engine costs (listings, runs started meanwhile and
   the engine's own work left out), shown with and without the bench client's share.

Reported: decisions/s over the decide phase (first decision sent to the last backlog decision
answered), p50/p99 per endpoint, errors by endpoint, status and message (any status but 200,
and 409 on a decision; "deadlock detected" 503s apart), winners per request, executions per
call, the ceilings and the ratio (to the mean of the raw ceilings before and after: the
machine may be shared), the idle probe, and the CPU each kind of process and the audit chain
took during the decide phase. Targets: 0 errors, one winner per request, one execution per
approved call, decide throughput at least half the raw ceiling. The database is
``APPROVALS_DATABASE_URL`` (an admin URL: a scratch database is created and dropped) or the
embedded server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import random
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import psycopg
from psycopg.rows import dict_row

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.scratch import scratch_database  # noqa: E402

APPROVALS = str(Path(sys.executable).parent / "approvals")
GROUPS = ("support", "finance")
#: The orders whose refunds the example policy sends to support (25.00) and finance (120.00).
ORDERS = {"support": "1001", "finance": "1002"}
MIN_RATIO = 0.5
DECIDE = "POST /api/v1/pending/{id}/decision"
LIST = "GET /api/v1/pending"
START = "POST /api/v1/runs"
#: A decide phase with no decision for this long stops and says so, instead of hanging.
STALL_SECONDS = 120.0
#: Run starts in flight at once, across both servers.
AGENTS_IN_FLIGHT = 4
TICK = os.sysconf("SC_CLK_TCK")
POSTGRES = "postgres (this database)"


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def problem(response: httpx.Response) -> str:
    """What an error response says, short enough to count by."""
    try:
        body = response.json()
        return str(body["error"]["message"])[:120]
    except (ValueError, KeyError, TypeError):
        return response.text[:120]


class Tally:
    """Latencies and statuses per endpoint, and the errors by endpoint, status and message."""

    def __init__(self) -> None:
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.statuses: dict[str, Counter[int]] = defaultdict(Counter)
        self.errors: Counter[str] = Counter()
        #: 503 "deadlock detected": the engine's settlement/decision deadlock, kept apart.
        self.deadlocks: Counter[str] = Counter()

    async def call(
        self, client: httpx.AsyncClient, label: str, method: str, url: str, **kw: Any
    ) -> httpx.Response | None:
        began = time.perf_counter()
        try:
            response = await client.request(method, url, **kw)
        except httpx.HTTPError as exc:
            self.errors[f"{label}: transport {type(exc).__name__}"] += 1
            return None
        self.latency[label].append((time.perf_counter() - began) * 1000)
        self.statuses[label][response.status_code] += 1
        return response

    def error(self, label: str, response: httpx.Response) -> None:
        message = problem(response)
        key = f"{label}: {response.status_code} {message}"
        if "deadlock detected" in message:
            self.deadlocks[key] += 1
        else:
            self.errors[key] += 1

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


class DecidePhase:
    """The approvers and the agents that keep starting runs, until the backlog is decided."""

    def __init__(self, args: argparse.Namespace, urls: list[str], backlog: set[str]) -> None:
        self.args = args
        self.urls = urls
        self.tally = Tally()
        self.remaining = set(backlog)
        self.decided: set[str] = set()
        self.winners: Counter[str] = Counter()
        self.lost_races = 0
        self.page_sizes: list[int] = []
        self.started_runs = 0
        self.done = asyncio.Event()
        self.first_sent: float | None = None
        self.last_backlog: float | None = None
        self.last_decision = time.perf_counter()

    async def approver(self, client: httpx.AsyncClient, index: int) -> None:
        base = self.urls[index % len(self.urls)]
        rng = random.Random(index)
        page = f"{base}/api/v1/pending?limit={self.args.page}&scope=decide"
        while not self.done.is_set():
            listed = await self.tally.call(client, LIST, "GET", page)
            if listed is None or listed.status_code != 200:
                if listed is not None:
                    self.tally.error(LIST, listed)
                await asyncio.sleep(0.5)
                continue
            # orjson, not httpx's json.loads: this one process plays 200 approvers on the
            # machine the servers run on, and parsing their 500-row pages with json.loads was
            # a third of its CPU, taken from the servers.
            items = orjson.loads(listed.content)
            self.page_sizes.append(len(items))
            mine = [r["id"] for r in items if r.get("may_decide") and r["id"] not in self.decided]
            if not mine:
                await asyncio.sleep(0.5)
                continue
            rng.shuffle(mine)
            for request_id in mine[: self.args.per_list or None]:
                if self.done.is_set():
                    return
                if request_id not in self.decided:
                    await self.decide(client, base, request_id, rng)

    async def decide(
        self, client: httpx.AsyncClient, base: str, request_id: str, rng: random.Random
    ) -> None:
        verdict: dict[str, Any] = (
            {"decision": "reject", "reason": "bench"}
            if rng.random() < 0.1
            else {"decision": "approve"}
        )
        if self.first_sent is None:
            self.first_sent = time.perf_counter()
        url = f"{base}/api/v1/pending/{request_id}/decision"
        answer = await self.tally.call(client, DECIDE, "POST", url, json=verdict)
        if answer is None:
            return
        if answer.status_code == 200:
            self.winners[request_id] += 1
            self.decided.add(request_id)
            self.last_decision = time.perf_counter()
            if request_id in self.remaining:
                self.remaining.discard(request_id)
                self.last_backlog = self.last_decision
                if not self.remaining:
                    self.done.set()
        elif answer.status_code == 409:
            self.lost_races += 1  # another approver decided it first: the right answer
            self.decided.add(request_id)
        else:
            self.tally.error(DECIDE, answer)

    async def agents(self, client: httpx.AsyncClient) -> None:
        """Start runs at ``--background-rate`` a second (open loop: a slow answer does not
        slow the rate down), at most ``AGENTS_IN_FLIGHT`` at a time: each start holds one of
        its server's pooled connections for as long as it runs (the thread's lease), so as
        many starts as a pool has connections jam that server."""
        if self.args.background_rate <= 0:
            return
        interval = 1.0 / self.args.background_rate
        in_flight: set[asyncio.Task[None]] = set()
        while not self.done.is_set():
            if len(in_flight) < AGENTS_IN_FLIGHT:
                task = asyncio.create_task(self.start_one(client))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.done.wait(), interval)
        if in_flight:
            await asyncio.gather(*in_flight)

    async def start_one(self, client: httpx.AsyncClient) -> None:
        self.started_runs += 1
        group = GROUPS[self.started_runs % 2]
        body = {"graph": "refund", "input": {"message": f"refund {ORDERS[group]}"}}
        url = self.urls[self.started_runs % len(self.urls)] + "/api/v1/runs"
        answer = await self.tally.call(client, START, "POST", url, json=body)
        if answer is None:
            return
        if answer.status_code != 200:
            self.tally.error(START, answer)
        elif (run := answer.json()).get("status") != "waiting":
            why = str(run.get("error"))[:120]
            self.tally.errors[f"{START}: 200 but {run.get('status')}: {why}"] += 1

    async def watchdog(self) -> None:
        while not self.done.is_set():
            await asyncio.sleep(5)
            if time.perf_counter() - self.last_decision > STALL_SECONDS:
                self.tally.errors[f"stalled: no decision for {STALL_SECONDS:.0f} s"] += 1
                self.done.set()


# -- processes, CPU ----------------------------------------------------------------------


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


def cpu_seconds(pid: int) -> float:
    """User + system CPU a process has used so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, every core, every process."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    return (sum(values) - idle) / TICK, sum(values) / TICK


async def backend_pids(url: str) -> list[int]:
    rows = await query(url, "SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
    return [int(r["pid"]) for r in rows]


class CpuMeter:
    """CPU seconds each kind of process spends between ``start`` and ``stop``."""

    def __init__(self, kinds: dict[str, list[int]]) -> None:
        self.kinds = kinds
        self.before: dict[int, float] = {}
        self.machine: tuple[float, float] = (0.0, 0.0)

    def start(self) -> None:
        self.before = {pid: cpu_seconds(pid) for pids in self.kinds.values() for pid in pids}
        self.machine = machine_busy()

    def stop(self, decisions: int, late: dict[str, list[int]]) -> dict[str, Any]:
        """``late``: processes of a kind that may have started since (a pool that grew)."""
        busy, total = machine_busy()
        used = {
            kind: round(
                sum(cpu_seconds(p) - self.before.get(p, 0.0) for p in {*pids, *late.get(kind, [])}),
                1,
            )
            for kind, pids in self.kinds.items()
        }
        wall = (total - self.machine[1]) / (os.cpu_count() or 1)
        return {
            "cpu_seconds": used,
            "cpu_ms_per_decision": {
                k: round(1000 * v / decisions, 2) if decisions else 0.0 for k, v in used.items()
            },
            "machine_busy": round((busy - self.machine[0]) / max(total - self.machine[1], 1e-9), 2),
            "wall_seconds": round(wall, 1),
        }


# -- the database ------------------------------------------------------------------------


async def query(url: str, statement: str, *params: Any) -> list[dict[str, Any]]:
    async with await psycopg.AsyncConnection.connect(url, row_factory=dict_row) as conn:
        return await (await conn.execute(statement, params)).fetchall()


async def jobs(url: str) -> dict[str, int]:
    rows = await query(url, "SELECT status, count(*) AS n FROM resume_queue GROUP BY status")
    return {r["status"]: int(r["n"]) for r in rows}


async def wait_drained(url: str, seconds: float) -> int:
    """Until no resume job is queued (the workers resumed every decided run); how many are left."""
    deadline = time.monotonic() + seconds
    while True:
        left = (await jobs(url)).get("queued", 0)
        if left == 0 or time.monotonic() > deadline:
            return left
        await asyncio.sleep(1)


async def checks(url: str, backlog: set[str]) -> dict[str, Any]:
    """What the database says about the decided requests and the approved calls."""
    per_request = await query(
        url,
        "SELECT a.id::text AS id, a.status,"
        " (SELECT count(*) FROM decisions d WHERE d.request_id = a.id) AS decisions"
        " FROM approval_requests a WHERE a.status <> 'pending' AND a.call_id NOT LIKE 'raw-%%'",
    )
    counts = Counter(int(r["decisions"]) for r in per_request)
    backlog_pending = len(backlog - {r["id"] for r in per_request})
    calls = await query(
        url,
        "SELECT a.status, count(*) AS calls,"
        " count(*) FILTER (WHERE x.ledger = 1 AND x.succeeded = 1) AS ledger_once,"
        " count(*) FILTER (WHERE x.ledger = 0) AS ledger_none,"
        " count(*) FILTER (WHERE x.ledger = 1 AND x.succeeded = 0) AS ledger_not_succeeded,"
        " count(*) FILTER (WHERE x.effects = 1) AS effect_once,"
        " count(*) FILTER (WHERE x.effects = 0) AS effect_none,"
        " count(*) FILTER (WHERE x.effects > 1) AS effect_more"
        " FROM approval_requests a CROSS JOIN LATERAL (SELECT"
        "   (SELECT count(*) FROM tool_executions t"
        "     WHERE t.run_id = a.run_id AND t.call_id = a.call_id) AS ledger,"
        "   (SELECT count(*) FROM tool_executions t WHERE t.run_id = a.run_id"
        "     AND t.call_id = a.call_id AND t.status = 'succeeded') AS succeeded,"
        "   (SELECT count(*) FROM demo_side_effects e"
        "     WHERE e.run_id = a.run_id AND e.call_id = a.call_id) AS effects) x"
        " WHERE a.status IN ('approved', 'rejected') AND a.call_id NOT LIKE 'raw-%%'"
        " GROUP BY a.status",
    )
    by_status = {r["status"]: {k: int(v) for k, v in r.items() if k != "status"} for r in calls}
    runs = await query(url, "SELECT status, count(*) AS n FROM runs GROUP BY status")
    failed = await query(
        url,
        "SELECT left(error, 200) AS error, count(*) AS n FROM runs WHERE status = 'failed'"
        " GROUP BY 1 ORDER BY 2 DESC",
    )
    return {
        "decided_requests": len(per_request),
        "decisions_per_decided_request": {str(k): v for k, v in sorted(counts.items())},
        "backlog_still_pending": backlog_pending,
        "approved": by_status.get("approved", {}),
        "rejected": by_status.get("rejected", {}),
        "runs": {r["status"]: int(r["n"]) for r in runs},
        "failed_runs": {str(r["error"]): int(r["n"]) for r in failed},
    }


async def copy_requests(url: str, count: int, tag: str) -> list[dict[str, Any]]:
    """``count`` new pending requests, copies of the real ones (each on its real run, in turn,
    with its own call id and the digest of what it shows): what the ceilings decide. Copied
    whole, so a column added later comes along."""
    from approvals.identity import shown_digest

    async with await psycopg.AsyncConnection.connect(
        url, autocommit=True, row_factory=dict_row
    ) as conn:
        copied = await (
            await conn.execute(
                "WITH src AS (SELECT a.*, row_number() OVER (ORDER BY a.id) - 1 AS k,"
                "   count(*) OVER () AS n FROM approval_requests a"
                "   WHERE a.call_id NOT LIKE 'raw-%%')"
                " INSERT INTO approval_requests"
                " SELECT (jsonb_populate_record(NULL::approval_requests,"
                "   to_jsonb(src) || jsonb_build_object('id', gen_random_uuid(),"
                "     'call_id', %(tag)s || g, 'identity', %(tag)s || g, 'status', 'pending',"
                "     'decided_at', NULL, 'interrupt_id', NULL, 'created_at', now(),"
                "     'expires_at', now() + interval '1 day'))).*"
                " FROM generate_series(0, %(count)s - 1) g JOIN src ON src.k = g %% src.n"
                " RETURNING id::text AS id, run_id::text AS run_id, call_id, tool, shown,"
                "   approvers",
                {"tag": f"raw-{tag}-", "count": count},
            )
        ).fetchall()
        async with conn.cursor() as cur:
            await cur.executemany(
                "UPDATE approval_requests SET shown_digest = %s WHERE id = %s",
                [
                    (
                        shown_digest(
                            run_id=r["run_id"],
                            call_id=r["call_id"],
                            tool=r["tool"],
                            shown=r["shown"],
                        ),
                        r["id"],
                    )
                    for r in copied
                ],
            )
    return copied


async def retire(url: str, requests: list[dict[str, Any]]) -> None:
    """Set the copies' resume jobs aside: a copy is not the call its run paused on."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            "UPDATE resume_queue SET status = 'skipped', last_error = 'bench: a copy'"
            " WHERE request_id = ANY(%s::uuid[]) AND status = 'queued'",
            ([r["id"] for r in requests],),
        )


async def lanes(count: int, work: Callable[[], Awaitable[bool]]) -> float:
    """Seconds for ``count`` lanes to run ``work`` until it says there is nothing left."""

    async def lane() -> None:
        while await work():
            pass

    began = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(count)))
    return time.perf_counter() - began


def rate(count: int, seconds: float, **more: Any) -> dict[str, Any]:
    return {
        "decisions": count,
        **more,
        "seconds": round(seconds, 2),
        "decisions_per_s": round(count / seconds, 1) if seconds > 0 else 0.0,
    }


async def raw_ceiling(url: str, count: int, connections: int, tag: str) -> dict[str, Any]:
    """The same transaction as ``PgDecisions.decide``, straight on psycopg."""
    from storage.queries import QUERIES

    copies = await copy_requests(url, count, tag)
    todo = [r["id"] for r in copies]
    free = [
        await psycopg.AsyncConnection.connect(
            url, row_factory=dict_row, prepare_threshold=0, autocommit=True
        )
        for _ in range(connections)
    ]
    conns = list(free)

    async def work() -> bool:
        if not todo:
            return False
        request_id, conn = todo.pop(), free.pop()
        try:
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
        finally:
            free.append(conn)
        return True

    try:
        seconds = await lanes(connections, work)
    finally:
        for conn in conns:
            await conn.close()
    await retire(url, copies)
    return rate(count, seconds, connections=connections)


async def decide_in_process(
    engine: Any, row: dict[str, Any], tokens: dict[str, list[str]], turn: Counter[str]
) -> None:
    """What ``POST .../decision`` does, without HTTP: the bearer token's lookup, then
    ``Engine.decide`` (visibility, the approver rules, the transaction)."""
    group = (row["approvers"] or [GROUPS[0]])[0]
    turn[group] += 1
    secret = tokens[group][turn[group] % len(tokens[group])]
    principal = await engine.accounts.verify_token(secret)
    await engine.decide(row["id"], "approve", principal=principal)


async def engine_ceiling(
    engine: Any, url: str, count: int, tasks: int, tokens: dict[str, list[str]]
) -> dict[str, Any]:
    """Decisions through ``Engine.decide`` in this one process, ``tasks`` at a time."""
    copies = await copy_requests(url, count, "engine")
    todo = list(copies)
    turn = Counter[str]()

    async def work() -> bool:
        if not todo:
            return False
        await decide_in_process(engine, todo.pop(), tokens, turn)
        return True

    seconds = await lanes(tasks, work)
    await retire(url, copies)
    return rate(count, seconds, tasks=tasks)


@contextlib.asynccontextmanager
async def bare_servers(
    url: str,
    secrets: list[tuple[str, str]],
    pool: int,
    env: dict[str, str],
    log_dir: Path,
) -> AsyncIterator[tuple[list[str], list[int]]]:
    """Two ``bench/bare_http.py`` servers (served as ``approvals serve`` is, each with a pool of
    ``pool``) knowing the approvers' tokens: their URLs and pids."""
    tokens = log_dir / "bare-tokens"
    tokens.write_text("\n".join(f"{group} {secret}" for group, secret in secrets), "utf-8")
    procs: list[asyncio.subprocess.Process] = []
    urls: list[str] = []
    try:
        for i in range(2):
            port = free_port()
            out = (log_dir / f"bare-{i}.log").open("wb")
            procs.append(
                await asyncio.create_subprocess_exec(
                    sys.executable,
                    str(ROOT / "bench" / "bare_http.py"),
                    *("--port", str(port), "--database-url", url, "--pool", str(pool)),
                    *("--tokens", str(tokens)),
                    env=env,
                    cwd=ROOT,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
            urls.append(f"http://127.0.0.1:{port}")
            await wait_ready(urls[-1], procs[-1])
        yield urls, [p.pid for p in procs]
    finally:
        await stop(procs)
        tokens.unlink(missing_ok=True)


async def bare_http_ceiling(
    url: str,
    count: int,
    secrets: list[tuple[str, str]],
    pool: int,
    env: dict[str, str],
    log_dir: Path,
) -> dict[str, Any]:
    """The floor of HTTP and Python: two ``bench/bare_http.py`` servers, whose ``/decide``
    endpoint checks the bearer token in memory and runs the raw ceiling's transaction, driven
    by as many approvers (each its own httpx client and token) as the decide phase, over copies
    of backlog requests, with nothing else running. What the decide phase costs beyond this is
    the engine's."""
    copies = await copy_requests(url, count, "bare")
    todo = [r["id"] for r in copies]
    statuses: Counter[str] = Counter()
    latency: list[float] = []
    async with bare_servers(url, secrets, pool, env, log_dir) as (urls, pids):
        clients = [
            httpx.AsyncClient(headers={"authorization": f"Bearer {s}"}, timeout=120)
            for _, s in secrets
        ]

        async def approver(index: int, client: httpx.AsyncClient) -> None:
            base = urls[index % len(urls)]
            while todo:
                began = time.perf_counter()
                try:
                    answer = await client.post(
                        f"{base}/decide/{todo.pop()}", json={"decision": "approve"}
                    )
                except httpx.HTTPError as exc:
                    statuses[f"transport {type(exc).__name__}"] += 1
                    continue
                latency.append((time.perf_counter() - began) * 1000)
                statuses[str(answer.status_code)] += 1

        meter = CpuMeter(
            {"servers": pids, "bench client": [os.getpid()], POSTGRES: await backend_pids(url)}
        )
        meter.start()
        began = time.perf_counter()
        try:
            await asyncio.gather(*(approver(i, c) for i, c in enumerate(clients)))
        finally:
            for c in clients:
                await c.aclose()
        seconds = time.perf_counter() - began
        decided = statuses["200"]
        # Backends a pool opened meanwhile count from zero.
        per_decision = meter.stop(decided, {POSTGRES: await backend_pids(url)})[
            "cpu_ms_per_decision"
        ]
    await retire(url, copies)
    return rate(
        decided,
        seconds,
        servers=len(urls),
        approvers=len(secrets),
        pool_per_server=pool,
        statuses=dict(statuses),
        p50_ms=round(statistics.median(latency), 1) if latency else 0.0,
        p99_ms=round(percentile(latency, 0.99), 1),
        server_cpu_ms_per_decision=per_decision["servers"],
        client_cpu_ms_per_decision=per_decision["bench client"],
        postgres_cpu_ms_per_decision=per_decision[POSTGRES],
    )


async def bare_workload_floor(
    args: argparse.Namespace,
    url: str,
    secrets: list[tuple[str, str]],
    env: dict[str, str],
    log_dir: Path,
) -> dict[str, Any]:
    """The decide phase's approvers (``DecidePhase``: the same client code, page, order and
    lost races) against two ``bench/bare_http.py`` servers answering the inbox with its own
    statement and the decision with the raw transaction, over ``--requests`` copies of backlog
    requests, with no workers and no runs started: what no implementation can beat for this
    workload on this machine, even with its resumes left for later."""
    copies = await copy_requests(url, args.requests, "workload")
    backlog = {r["id"] for r in copies}
    quiet = argparse.Namespace(**{**vars(args), "background_rate": 0.0})
    async with bare_servers(url, secrets, args.pool, env, log_dir) as (urls, pids):
        phase = DecidePhase(quiet, urls, backlog)
        meter = CpuMeter(
            {"servers": pids, "bench client": [os.getpid()], POSTGRES: await backend_pids(url)}
        )
        clients = [
            httpx.AsyncClient(headers={"authorization": f"Bearer {s}"}, timeout=120)
            for _, s in secrets
        ]
        meter.start()
        began = time.perf_counter()
        try:
            await asyncio.gather(
                phase.watchdog(), *(phase.approver(c, i) for i, c in enumerate(clients))
            )
        finally:
            for c in clients:
                await c.aclose()
        ended = time.perf_counter()
        decisions = sum(phase.winners.values())
        cpu = meter.stop(decisions, {POSTGRES: await backend_pids(url)})
    await retire(url, copies)
    window = (phase.last_backlog or ended) - (phase.first_sent or began)
    return {
        "servers": len(urls),
        "approvers": len(secrets),
        "decisions": decisions,
        "backlog_decisions": len(backlog) - len(phase.remaining),
        "decide_window_seconds": round(window, 1),
        "decisions_per_s": round(decisions / window, 1) if window > 0 else 0.0,
        "lost_races": phase.lost_races,
        "lists": phase.tally.endpoints().get(LIST, {}).get("calls", 0),
        "items_per_list_p50": statistics.median(phase.page_sizes) if phase.page_sizes else 0,
        "errors": sum(phase.tally.errors.values()),
        "endpoints": phase.tally.endpoints(),
        **cpu,
    }


async def bare_resume_floor(url: str, count: int, tasks: int) -> dict[str, Any]:
    """The CPU a resume costs with nothing of the engine: ``bench/approval_cycle.py``'s bare
    LangGraph variant (the refund agent's shape, ``interrupt()`` in the tool, the tool's one
    side-effect row, LangGraph's own ``AsyncPostgresSaver``) in this process, on the same
    database. ``count`` runs are paused first (not metered), then resumed on ``tasks`` tasks
    while this process's CPU and that of its PostgreSQL backends is metered. Each approved or
    rejected call of the decide phase is followed by one resume, so any implementation's
    workers spend at least this per decision, on the same cores as the servers."""
    from langchain_core.messages import HumanMessage
    from langgraph.types import Command

    from bench.cycle_agent import GRAPH, GRAPH_ENTRY, MESSAGE, REQUESTER, build_bare
    from web.engine import open_engine
    from web.settings import Settings

    settings = Settings(
        database_url=url,
        graphs={GRAPH: GRAPH_ENTRY},
        config_file=ROOT / "bench" / "no-config.toml",
        pool_max_size=2 * tasks + 4,
    )
    async with open_engine(url, settings) as engine:
        graph = build_bare(engine.registry.get(GRAPH).checkpointer, engine.effects)
        threads = [str(uuid.uuid4()) for _ in range(count)]

        def config(thread: str) -> Any:
            return {"configurable": {"thread_id": thread}}

        async def pause(thread: str) -> None:
            state = {"messages": [HumanMessage(MESSAGE)], "run_id": thread}
            paused = await graph.ainvoke(state | {"started_by": REQUESTER}, config(thread))
            if "__interrupt__" not in paused:
                raise RuntimeError("the bare run did not pause")

        async def resume(thread: str) -> None:
            done = await graph.ainvoke(
                Command(resume={"verdict": "approve", "principal": "bench"}), config(thread)
            )
            if not str(done["messages"][-1].content).startswith("Refunded"):
                raise RuntimeError(f"the bare resume did not finish: {done['messages'][-1]}")

        paused = list(threads)

        async def pause_one() -> bool:
            if not paused:
                return False
            await pause(paused.pop())
            return True

        await lanes(tasks, pause_one)
        warm, measured = threads[: min(20, count // 10)], threads[min(20, count // 10) :]
        for thread in warm:
            await resume(thread)
        backends = await backend_pids(url)
        before = {pid: cpu_seconds(pid) for pid in backends}
        client = cpu_seconds(os.getpid())

        async def resume_one() -> bool:
            if not measured:
                return False
            await resume(measured.pop())
            return True

        resumed = len(measured)
        seconds = await lanes(tasks, resume_one)
        client = cpu_seconds(os.getpid()) - client
        pg = sum(
            cpu_seconds(pid) - before.get(pid, 0.0) for pid in {*backends, *await backend_pids(url)}
        )
    return {
        "resumes": resumed,
        "tasks": tasks,
        "seconds": round(seconds, 2),
        "resumes_per_s": round(resumed / seconds, 1) if seconds > 0 else 0.0,
        "client_cpu_ms_per_resume": round(1000 * client / resumed, 2) if resumed else 0.0,
        "postgres_cpu_ms_per_resume": round(1000 * pg / resumed, 2) if resumed else 0.0,
    }


def cpu_floor(bare: dict[str, Any], resume: dict[str, Any], ceiling: float) -> dict[str, Any]:
    """The most decisions a second any implementation can reach here while its workers resume
    each decided run during the decide phase: the machine's cores over the CPU a bare HTTP
    decision and a bare resume cost (without the listings, the runs started meanwhile and
    everything else of the engine), with and without the bench client's own share."""
    cores = os.cpu_count() or 1
    decision = bare["server_cpu_ms_per_decision"] + bare["postgres_cpu_ms_per_decision"]
    resumed = resume["client_cpu_ms_per_resume"] + resume["postgres_cpu_ms_per_resume"]
    out: dict[str, Any] = {"cores": cores}
    for label, ms in (
        ("with_client", decision + bare["client_cpu_ms_per_decision"] + resumed),
        ("without_client", decision + resumed),
    ):
        per_s = 1000 * cores / ms if ms > 0 else 0.0
        out[label] = {
            "cpu_ms_per_decision": round(ms, 2),
            "decisions_per_s": round(per_s, 1),
            "to_raw_ceiling": round(per_s / ceiling, 3) if ceiling else 0.0,
        }
    return out


def timings(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(values), 2) if values else 0.0,
        "p99_ms": round(percentile(values, 0.99), 2),
    }


async def idle_probe(
    engine: Any,
    url: str,
    base: str,
    server: int,
    tokens: dict[str, list[str]],
    page: int,
    count: int,
) -> dict[str, Any]:
    """One call at a time, nothing else running: ``/healthz`` (HTTP alone; on a kept-alive
    connection and on a new one each time), the inbox's first page, and decisions over HTTP and
    in-process, alternating, on copies of backlog requests."""
    found: dict[str, list[float]] = defaultdict(list)
    secret = tokens[GROUPS[0]][0]
    listing = f"{base}/api/v1/pending?limit={page}&scope=decide"
    async with (
        httpx.AsyncClient(timeout=60) as client,
        httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_keepalive_connections=0)) as fresh,
    ):

        async def timed(label: str, call: Awaitable[Any]) -> Any:
            began = time.perf_counter()
            result = await call
            found[label].append((time.perf_counter() - began) * 1000)
            return result

        auth = {"authorization": f"Bearer {secret}"}
        cpu = cpu_seconds(server)
        for _ in range(count):
            await timed("healthz, HTTP", client.get(f"{base}/healthz"))
            await timed("healthz, HTTP, new connection", fresh.get(f"{base}/healthz"))
            listed = await timed("list, HTTP", client.get(listing, headers=auth))
            listed.raise_for_status()
        server_ms = {"list and 2 healthz": 1000 * (cpu_seconds(server) - cpu) / count}
        copies = await copy_requests(url, 2 * count, "probe")
        turn = Counter[str]()
        cpu = cpu_seconds(server)
        for http_row, engine_row in zip(copies[::2], copies[1::2], strict=True):
            group = (http_row["approvers"] or [GROUPS[0]])[0]
            headers = {"authorization": f"Bearer {tokens[group][0]}"}
            answer = await timed(
                "decide, HTTP",
                client.post(
                    f"{base}/api/v1/pending/{http_row['id']}/decision",
                    json={"decision": "approve"},
                    headers=headers,
                ),
            )
            answer.raise_for_status()
            await timed("decide, in-process", decide_in_process(engine, engine_row, tokens, turn))
        server_ms["decide"] = 1000 * (cpu_seconds(server) - cpu) / count
        await retire(url, copies)
    return {
        "latency": {label: timings(values) for label, values in found.items()},
        "server_cpu_ms_per_call": {k: round(v, 2) for k, v in server_ms.items()},
    }


# -- the run -----------------------------------------------------------------------------


async def make_principals(engine: Any, approvers: int) -> tuple[str, list[tuple[str, str]]]:
    """An agents' token, and each approver's group and token (an account in that group)."""
    shop = await engine.accounts.create_token("shop", ["agents"], "bench", owner=None)
    made = []
    for i in range(approvers):
        name, group = f"approver{i:03d}", GROUPS[i % 2]
        await engine.accounts.add_user(name, "bench password, not a secret", [group])
        made.append((group, await engine.accounts.create_token(name, [group], "bench", owner=name)))
    return shop, made


async def fill_backlog(engine: Any, url: str, count: int, tasks: int) -> dict[str, Any]:
    """Pause ``count`` refund runs, half for support and half for finance, through
    ``Engine.start_run`` on ``tasks`` concurrent tasks."""
    engine.registry  # noqa: B018 -- builds the graphs (imports LangGraph) before the clock
    left = [count]
    problems: Counter[str] = Counter()

    async def work() -> bool:
        if left[0] <= 0:
            return False
        left[0] -= 1
        group = GROUPS[left[0] % 2]
        message = {"message": f"refund {ORDERS[group]}"}
        outcome = await engine.start_run("refund", message, principal="bench:backlog")
        if outcome.status != "waiting":
            problems[f"run ended {outcome.status}: {outcome.error}"] += 1
        return True

    seconds = await lanes(tasks, work)
    pending = await query(
        url, "SELECT id::text AS id FROM approval_requests WHERE status = 'pending'"
    )
    return {
        "runs": count,
        "tasks": tasks,
        "seconds": round(seconds, 1),
        "runs_per_s": round(count / seconds, 1),
        "pending_requests": len(pending),
        "problems": dict(problems),
        "ids": {r["id"] for r in pending},
    }


async def spawn(env: dict[str, str], log: Path, *argv: str) -> asyncio.subprocess.Process:
    out = log.open("wb")
    return await asyncio.create_subprocess_exec(
        APPROVALS,
        *argv,
        env=env,
        cwd=ROOT,
        stdout=out,
        stderr=subprocess.STDOUT,
    )


async def stop(procs: list[asyncio.subprocess.Process]) -> None:
    for proc in procs:
        if proc.returncode is None:
            proc.terminate()
    for proc in procs:
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()


async def audit_events(url: str) -> int:
    return int((await query(url, "SELECT count(*) AS n FROM audit_events"))[0]["n"])


async def decide_phase(
    args: argparse.Namespace,
    urls: list[str],
    backlog: set[str],
    shop: str,
    secrets: list[tuple[str, str]],
    meter: CpuMeter,
    url: str,
) -> tuple[DecidePhase, dict[str, Any]]:
    phase = DecidePhase(args, urls, backlog)
    timeout = httpx.Timeout(120)
    # A start the client gave up on goes on in its server: wait for it, or the next start
    # would be one more than the servers hold.
    agent = httpx.AsyncClient(headers={"authorization": f"Bearer {shop}"}, timeout=600)
    clients = [
        httpx.AsyncClient(headers={"authorization": f"Bearer {s}"}, timeout=timeout)
        for _, s in secrets
    ]
    jobs_before, events_before = await jobs(url), await audit_events(url)
    meter.start()
    began = time.perf_counter()
    try:
        await asyncio.gather(
            phase.agents(agent),
            phase.watchdog(),
            *(phase.approver(c, i) for i, c in enumerate(clients)),
        )
    finally:
        for c in [agent, *clients]:
            await c.aclose()
    ended = time.perf_counter()
    decisions = sum(phase.winners.values())
    cpu = meter.stop(decisions, {POSTGRES: await backend_pids(url)})
    jobs_after, events_after = await jobs(url), await audit_events(url)
    resumed = sum(v for k, v in jobs_after.items() if k != "queued") - sum(
        v for k, v in jobs_before.items() if k != "queued"
    )
    window = (phase.last_backlog or ended) - (phase.first_sent or began)
    return phase, {
        "seconds": round(ended - began, 1),
        "decide_window_seconds": round(window, 1),
        "decisions": decisions,
        "backlog_decisions": len(backlog) - len(phase.remaining),
        "decisions_per_s": round(decisions / window, 1) if window > 0 else 0.0,
        "lost_races": phase.lost_races,
        "runs_started": phase.started_runs,
        "items_per_list_p50": statistics.median(phase.page_sizes) if phase.page_sizes else 0,
        "resumed": resumed,
        "resumes_per_s": round(resumed / (ended - began), 1),
        "queued_at_end": jobs_after.get("queued", 0),
        "audit_events_per_s": round((events_after - events_before) / (ended - began), 1),
        **cpu,
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from web.engine import open_engine
    from web.settings import Settings

    load_before = os.getloadavg()
    log_dir = ROOT / ".approvals" / "http-load"
    log_dir.mkdir(parents=True, exist_ok=True)
    conns = 2 * args.pool
    size = min(args.requests, args.ceiling_requests)
    procs: list[asyncio.subprocess.Process] = []
    async with scratch_database(with_dbos=False) as scratch:
        url = scratch.url
        env = {k: v for k, v in os.environ.items() if not k.startswith("APPROVALS_")}
        env.update(
            APPROVALS_EXAMPLES="true",
            APPROVALS_DATABASE_URL=url,
            APPROVALS_DATA_DIR=str(log_dir),
            APPROVALS_POOL_MAX_SIZE=str(args.pool),
            APPROVALS_LOG_LEVEL="WARNING",
            PYTHONPATH=str(ROOT),  # the code beside this file, whatever is installed
        )
        try:
            # This process's engine is closed before the decide phase: the servers, the
            # workers and the other users of a shared PostgreSQL need its connections more.
            settings = Settings(
                database_url=url, pool_max_size=max(args.fill_tasks, conns) + 4, examples=True
            )
            async with open_engine(url, settings) as engine:
                shop, secrets = await make_principals(engine, args.approvers)
                tokens: dict[str, list[str]] = defaultdict(list)
                for group, secret in secrets:
                    tokens[group].append(secret)
                fill = await fill_backlog(engine, url, args.requests, args.fill_tasks)
                backlog: set[str] = fill.pop("ids")
                raw_before = await raw_ceiling(url, size, conns, "sql-before")
                in_engine = await engine_ceiling(engine, url, size, conns, tokens)
                urls = []
                for i in range(2):
                    port = free_port()
                    procs.append(
                        await spawn(env, log_dir / f"serve-{i}.log", "serve", "--port", str(port))
                    )
                    urls.append(f"http://127.0.0.1:{port}")
                    await wait_ready(urls[-1], procs[-1])
                probe = await idle_probe(engine, url, urls[0], procs[0].pid, tokens, args.page, 50)
            workers = [
                functools.partial(spawn, env, log_dir / f"worker-{i}.log", "worker")
                for i in range(2)
            ]
            if not args.workers_after:
                procs += [await start() for start in workers]
            meter = CpuMeter(
                {
                    "servers": [p.pid for p in procs[:2]],
                    "workers": [p.pid for p in procs[2:]],  # none yet with --workers-after
                    "bench client": [os.getpid()],
                    POSTGRES: await backend_pids(url),
                }
            )
            phase, decided = await decide_phase(args, urls, backlog, shop, secrets, meter, url)
            if args.workers_after:
                procs += [await start() for start in workers]
            drain_began = time.perf_counter()
            left = await wait_drained(url, args.drain_seconds)
            drain_seconds = time.perf_counter() - drain_began
        finally:
            await stop(procs)
        found = await checks(url, backlog)
        raw_after = await raw_ceiling(url, size, conns, "sql-after")
        bare = await bare_http_ceiling(url, size, secrets, args.pool, env, log_dir)
        workload = await bare_workload_floor(args, url, secrets, env, log_dir)
        resume_floor = await bare_resume_floor(url, args.floor_resumes, 4)
    return report_of(
        args,
        scratch.where,
        load_before,
        fill,
        phase,
        decided,
        found,
        left,
        {
            "drain_seconds": round(drain_seconds, 1),
            "raw_ceiling_before": raw_before,
            "raw_ceiling_after": raw_after,
            "engine_ceiling": in_engine,
            "bare_http_ceiling": bare,
            "bare_workload_floor": workload,
            "bare_resume_floor": resume_floor,
            "idle_probe": probe,
        },
    )


def report_of(
    args: argparse.Namespace,
    where: str,
    load_before: tuple[float, float, float],
    fill: dict[str, Any],
    phase: DecidePhase,
    decided: dict[str, Any],
    found: dict[str, Any],
    left: int,
    more: dict[str, Any],
) -> dict[str, Any]:
    tally = phase.tally
    ceiling = (
        more["raw_ceiling_before"]["decisions_per_s"] + more["raw_ceiling_after"]["decisions_per_s"]
    ) / 2
    ratio = round(decided["decisions_per_s"] / ceiling, 3) if ceiling else 0.0
    bare = more["bare_http_ceiling"]["decisions_per_s"]
    winners = Counter(phase.winners.values())
    report: dict[str, Any] = {
        "database": where,
        "requests": args.requests,
        "approvers": args.approvers,
        "servers": 2,
        "workers": 2,
        "pool_per_server": args.pool,
        "page": args.page,
        "per_list": args.per_list,
        "background_rate": args.background_rate,
        "workers_during_decide_phase": not args.workers_after,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "backlog": fill,
        "decide": decided,
        "jobs_left_queued": left,
        "endpoints": tally.endpoints(),
        "errors": sum(tally.errors.values()),
        "errors_by_kind": dict(tally.errors.most_common()),
        "deadlocks": sum(tally.deadlocks.values()),
        "deadlocks_by_kind": dict(tally.deadlocks.most_common()),
        "http_winners_per_request": {str(k): v for k, v in sorted(winners.items())},
        "database_checks": found,
        **more,
        "raw_ceiling_per_s": round(ceiling, 1),
        "ratio_to_raw_ceiling": ratio,
        # How far HTTP and Python alone stand from the raw ceiling, and the engine from them.
        "bare_http_to_raw_ceiling": round(bare / ceiling, 3) if ceiling else 0.0,
        "ratio_to_bare_http": round(decided["decisions_per_s"] / bare, 3) if bare else 0.0,
        "bare_workload_to_raw_ceiling": round(
            more["bare_workload_floor"]["decisions_per_s"] / ceiling, 3
        )
        if ceiling
        else 0.0,
        "cpu_floor": cpu_floor(more["bare_http_ceiling"], more["bare_resume_floor"], ceiling),
    }
    approved, rejected = found["approved"], found["rejected"]
    report["targets"] = {
        "zero_errors": report["errors"] == 0 and report["deadlocks"] == 0,
        "one_winner_per_request": set(found["decisions_per_decided_request"]) <= {"1"}
        and set(report["http_winners_per_request"]) <= {"1"}
        and found["backlog_still_pending"] == 0,
        "one_execution_per_approved_call": left == 0
        and approved.get("ledger_once", 0) == approved.get("calls", -1)
        and approved.get("effect_once", 0) == approved.get("calls", -1)
        and rejected.get("ledger_none", 0) == rejected.get("calls", 0)
        and rejected.get("effect_none", 0) == rejected.get("calls", 0),
        "at_least_half_the_raw_ceiling": ratio >= MIN_RATIO,
    }
    return report


def show(report: dict[str, Any]) -> None:
    fill, d = report["backlog"], report["decide"]
    print(
        f"http load: {report['approvers']} approvers, {report['servers']} servers"
        f" (pool {report['pool_per_server']} each), {report['workers']} workers"
        f" ({report['database']}); load average {report['load_average_before']}"
        f" -> {report['load_average_after']}"
    )
    print(
        f"  backlog: {fill['runs']} runs paused in {fill['seconds']} s ({fill['runs_per_s']}/s,"
        f" {fill['tasks']} tasks in-process), {fill['pending_requests']} pending requests"
        f" {fill['problems'] or ''}"
    )
    print(
        f"  decide: {d['decisions']} decisions ({d['backlog_decisions']} of the backlog) in"
        f" {d['decide_window_seconds']} s = {d['decisions_per_s']}/s; lost races (409):"
        f" {d['lost_races']}; {d['runs_started']} runs started meanwhile;"
        f" {d['resumed']} resumed ({d['resumes_per_s']}/s);"
        f" {d['audit_events_per_s']} audit events/s"
    )
    print(f"  cpu ms per decision: {d['cpu_ms_per_decision']}; machine busy {d['machine_busy']}")
    print(f"  drained {report['drain_seconds']} s later, jobs left {report['jobs_left_queued']}")
    before, after = report["raw_ceiling_before"], report["raw_ceiling_after"]
    print(
        f"  raw ceiling: {before['decisions_per_s']}/s before, {after['decisions_per_s']}/s"
        f" after, on {before['connections']} connections;"
        f" Engine.decide in-process: {report['engine_ceiling']['decisions_per_s']}/s;"
        f" ratio {report['ratio_to_raw_ceiling']} (target >= {MIN_RATIO})"
    )
    bare = report["bare_http_ceiling"]
    print(
        f"  bare HTTP floor: {bare['decisions_per_s']}/s ({bare['servers']} servers of"
        f" bench/bare_http.py: token checked in memory, the raw transaction, nothing else;"
        f" {bare['approvers']} approvers; p50 {bare['p50_ms']} ms, p99 {bare['p99_ms']} ms;"
        f" CPU per decision: servers {bare['server_cpu_ms_per_decision']} ms, bench client"
        f" {bare['client_cpu_ms_per_decision']} ms; {bare['statuses']})"
        f" = {report['bare_http_to_raw_ceiling']} of the raw ceiling; the decide phase is"
        f" {report['ratio_to_bare_http']} of it"
    )
    w = report["bare_workload_floor"]
    print(
        f"  bare workload floor: {w['decisions_per_s']}/s (the decide phase's {w['approvers']}"
        f" approvers, page and order against {w['servers']} servers of bench/bare_http.py: the"
        f" inbox's own statement and the raw transaction; no workers, no runs started;"
        f" {w['decisions']} decisions, {w['lost_races']} lost races, {w['lists']} listings of"
        f" {w['items_per_list_p50']} items (p50); CPU per decision: {w['cpu_ms_per_decision']};"
        f" errors {w['errors']}) = {report['bare_workload_to_raw_ceiling']} of the raw ceiling"
    )
    resume, floor = report["bare_resume_floor"], report["cpu_floor"]
    print(
        f"  bare resume: {resume['resumes']} bare LangGraph resumes on {resume['tasks']} tasks,"
        f" {resume['resumes_per_s']}/s; CPU per resume: client"
        f" {resume['client_cpu_ms_per_resume']} ms, postgres"
        f" {resume['postgres_cpu_ms_per_resume']} ms"
    )
    for label, f in (("with", floor["with_client"]), ("without", floor["without_client"])):
        print(
            f"  CPU floor {label} the bench client: {floor['cores']} cores /"
            f" {f['cpu_ms_per_decision']} ms (bare HTTP decision + bare resume) ="
            f" {f['decisions_per_s']}/s at most = {f['to_raw_ceiling']} of the raw ceiling"
            f" for any implementation whose workers resume during the decide phase"
        )
    print(f"  idle, one at a time: {json.dumps(report['idle_probe'])}")
    print(f"  errors: {report['errors']} {report['errors_by_kind'] or ''}")
    print(f"  deadlocks (503): {report['deadlocks']} {report['deadlocks_by_kind'] or ''}")
    for label, e in report["endpoints"].items():
        print(
            f"  {label:<36} {e['calls']:>7} calls  p50 {e['p50_ms']:>7} ms"
            f"  p99 {e['p99_ms']:>7} ms  {e['statuses']}"
        )
    print(f"  winners per request (HTTP): {report['http_winners_per_request']}")
    print(f"  database: {json.dumps(report['database_checks'])}")
    for name, ok in report["targets"].items():
        print(f"  {'PASS' if ok else 'FAIL'} {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000, help="the backlog to decide")
    parser.add_argument("--approvers", type=int, default=200)
    parser.add_argument(
        "--page",
        type=int,
        default=500,
        help="the inbox page an approver lists (the largest the API gives: the approvers of a"
        " group spread over as many requests as they can see)",
    )
    parser.add_argument(
        "--per-list",
        type=int,
        default=0,
        help="decisions an approver tries per listing (0: every one on the page)",
    )
    parser.add_argument(
        "--background-rate", type=float, default=2.0, help="runs started per second meanwhile"
    )
    parser.add_argument("--fill-tasks", type=int, default=8, help="tasks pausing the backlog")
    parser.add_argument(
        "--pool",
        type=int,
        default=10,
        help="each server's and worker's pool (the ceilings use as many connections as the"
        " two servers' pools)",
    )
    parser.add_argument("--ceiling-requests", type=int, default=3000)
    parser.add_argument(
        "--floor-resumes",
        type=int,
        default=1000,
        help="bare LangGraph runs paused and resumed to measure what a resume costs",
    )
    parser.add_argument("--drain-seconds", type=float, default=1800)
    parser.add_argument(
        "--workers-after",
        action="store_true",
        help="start the workers only once the backlog is decided (to see what they cost it)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.requests < 1 or args.approvers < 2 or args.fill_tasks < 1 or args.pool < 2:
        parser.error("--requests must be at least 1, --approvers 2, --fill-tasks 1, --pool 2")
    if args.floor_resumes < 10:
        parser.error("--floor-resumes must be at least 10")
    if not 1 <= args.page <= 500 or args.per_list < 0 or args.background_rate < 0:
        parser.error("--page must be 1..500, --per-list at least 0, --background-rate >= 0")
    report = asyncio.run(run(args))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        show(report)


if __name__ == "__main__":
    main()
