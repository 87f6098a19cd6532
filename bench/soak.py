"""Fault soak: kill real processes at each point of a call's life, many times, and count.

    python bench/soak.py [--rounds N] [--json]

Each round starts a refund run of the example agent and decides it, killing a process (SIGKILL)
at one crash point:

* ``starter_after_request``: the process running ``approvals runs start`` once its request is
  recorded (before it settled the run);
* ``worker_during_resume``: a worker a moment after it claimed the job;
* ``worker_during_tool``: a worker while the tool runs (its side effect happened, the ledger
  still says "started");
* ``worker_after_tool``: a worker after the ledger recorded the result, before the checkpoint;
* ``server_after_decision``: ``approvals serve`` right after it answered a decision.

Then it recovers as an operator would (``approvals worker --drain``; a call left
``outcome_unknown`` is reconciled as "took effect" when its side effect is there) and checks:
the run is completed, the refund happened at most once (exactly once when approved), and the
decision log verifies when ``approvals audit verify`` exists. It prints kills per crash point,
runs lost and double executions. The database is ``APPROVALS_DATABASE_URL`` (an admin URL: a
scratch database is created and dropped) or the embedded server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.scratch import scratch_database  # noqa: E402

APPROVALS = str(Path(sys.executable).parent / "approvals")
POINTS = (
    "starter_after_request",
    "worker_during_resume",
    "worker_during_tool",
    "worker_after_tool",
    "server_after_decision",
)


class Soak:
    def __init__(self, url: str, env: dict[str, str]) -> None:
        self.url = url
        self.env = env

    async def cli(
        self, *args: str, env: dict[str, str] | None = None, stdin: str | None = None
    ) -> Any:
        proc = await asyncio.create_subprocess_exec(
            APPROVALS,
            *args,
            env=env or self.env,
            stdin=subprocess.PIPE if stdin is not None else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(
            proc.communicate(stdin.encode() if stdin is not None else None), 180
        )
        if proc.returncode != 0:
            raise RuntimeError(f"approvals {' '.join(args)}: {err.decode().strip()}")
        return json.loads(out) if out.strip().startswith((b"{", b"[")) else out.decode()

    async def spawn(self, *args: str, env: dict[str, str] | None = None) -> Any:
        return await asyncio.create_subprocess_exec(
            APPROVALS,
            *args,
            env=env or self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    async def query(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        import psycopg
        from psycopg.rows import dict_row

        async with await psycopg.AsyncConnection.connect(
            self.url, autocommit=True, row_factory=dict_row
        ) as conn:
            return await (await conn.execute(sql, params)).fetchall()

    async def wait_for(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rows = await self.query(sql, *params)
            if rows:
                return rows
            await asyncio.sleep(0.05)
        raise TimeoutError(sql)

    async def pending_of(self, run_id: str) -> str:
        rows = await self.wait_for(
            "SELECT id::text FROM approval_requests WHERE run_id = %s AND status = 'pending'",
            run_id,
        )
        return str(rows[0]["id"])

    async def kill(self, proc: Any) -> None:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()

    async def round(self, point: str) -> str:
        """One run through one crash point; returns its run id."""
        if point == "starter_after_request":
            starter = await self.spawn(
                "runs", "start", "refund", "--input", '{"message": "refund 1001"}', "--as", "soak"
            )
            rows = await self.wait_for(
                "SELECT run_id::text FROM approval_requests WHERE created_at > now() - "
                "interval '30 seconds' AND run_id NOT IN (SELECT run_id FROM demo_side_effects) "
                "AND status = 'pending' ORDER BY created_at DESC LIMIT 1"
            )
            await self.kill(starter)
            run_id = str(rows[0]["run_id"])
            request = await self.pending_of(run_id)
            await self.cli("decide", request, "approve", "--as", "soak-approver")
            return run_id
        started = await self.cli(
            "runs", "start", "refund", "--input", '{"message": "refund 1001"}', "--as", "soak"
        )
        run_id, request = str(started["run_id"]), str(started["pending"][0])
        if point == "server_after_decision":
            await self.server_decides(request)
            return run_id
        await self.cli("decide", request, "approve", "--as", "soak-approver")
        env = dict(self.env)
        if point == "worker_during_tool":
            env["APPROVALS_DEMO_TOOL_DELAY"] = "60"
        if point == "worker_after_tool":
            env["APPROVALS_FAULT_PAUSE_AFTER_TOOL"] = "60"
        worker = await self.spawn("worker", env=env)
        if point == "worker_during_resume":
            await asyncio.sleep(random.uniform(0.05, 0.6))
        elif point == "worker_during_tool":
            await self.wait_for("SELECT 1 FROM demo_side_effects WHERE run_id = %s", run_id)
        else:
            await self.wait_for(
                "SELECT 1 FROM tool_executions WHERE run_id = %s AND status = 'succeeded'", run_id
            )
        await self.kill(worker)
        return run_id

    async def server_decides(self, request: str) -> None:
        import httpx

        # A person's token (a service token may not decide): an account, and a token it owns.
        name = f"soak{random.randrange(10**9)}"
        await self.cli(
            "users",
            "add",
            name,
            "--group",
            "support",
            "--password-stdin",
            stdin="soak approver password\n",
        )
        token = (
            await self.cli("tokens", "create", name, "--group", "support", "--owner", name)
        ).strip()
        server = await self.spawn("serve", "--port", "0")
        try:
            assert server.stdout is not None
            while True:
                line = (await asyncio.wait_for(server.stdout.readline(), 60)).decode()
                found = re.search(r"serving (http://\S+)", line)
                if found:
                    break
            async with httpx.AsyncClient(base_url=found.group(1), timeout=30) as api:
                await api.post(
                    f"/api/v1/pending/{request}/decision",
                    json={"decision": "approve"},
                    headers={"authorization": f"Bearer {token}"},
                )
        finally:
            await self.kill(server)

    async def recover(self) -> None:
        """What an operator does after a crash: drain, reconcile unknown outcomes, drain."""
        await self.cli("worker", "--drain")
        for item in await self.cli("outcomes", "list", "--json"):
            if not item["request_id"]:
                continue
            happened = await self.query(
                "SELECT 1 FROM demo_side_effects WHERE run_id = %s AND call_id = %s",
                item["run_id"],
                item["call_id"],
            )
            verdict = ["approve"] if happened else ["reject", "--reason", "no side effect"]
            await self.cli("decide", item["request_id"], *verdict, "--as", "soak-operator")
        await self.cli("worker", "--drain")


async def soak(rounds: int) -> dict[str, Any]:
    async with scratch_database(with_dbos=False) as scratch:
        url, where = scratch.url, scratch.where
        env = {k: v for k, v in os.environ.items() if not k.startswith("APPROVALS_")}
        env["APPROVALS_DATABASE_URL"] = url
        env["APPROVALS_EXAMPLES"] = "true"  # the soak drives the refund example
        env["APPROVALS_DATA_DIR"] = str(ROOT / ".approvals" / "soak")
        s = Soak(url, env)
        kills: Counter[str] = Counter()
        runs: dict[str, str] = {}
        started = time.monotonic()
        for i in range(rounds):
            point = POINTS[i % len(POINTS)]
            run_id = await s.round(point)
            runs[run_id] = point
            kills[point] += 1
            await s.recover()
        lost: Counter[str] = Counter()
        doubled: Counter[str] = Counter()
        for run_id, point in runs.items():
            status = await s.query("SELECT status FROM runs WHERE id = %s", run_id)
            effects = await s.query(
                "SELECT count(*) AS n FROM demo_side_effects WHERE run_id = %s", run_id
            )
            if not status or status[0]["status"] != "completed" or effects[0]["n"] != 1:
                lost[point] += 1
            if effects[0]["n"] > 1:
                doubled[point] += 1
        try:
            verified = (await s.cli("audit", "verify")).strip()
        except RuntimeError as exc:
            verified = f"not verified: {exc}"
        return {
            "database": where,
            "rounds": rounds,
            "seconds": round(time.monotonic() - started, 1),
            "kills": dict(kills),
            "runs_lost": dict(lost),
            "double_executions": dict(doubled),
            "audit": verified,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = asyncio.run(soak(args.rounds))
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"fault soak: {report['rounds']} rounds in {report['seconds']} s ({report['database']})")
    print(f"{'crash point':<24}{'kills':>7}{'runs lost':>11}{'double executions':>19}")
    for point in POINTS:
        kills = report["kills"].get(point, 0)
        lost = report["runs_lost"].get(point, 0)
        doubled = report["double_executions"].get(point, 0)
        print(f"{point:<24}{kills:>7}{lost:>11}{doubled:>19}")
    print(f"audit log: {report['audit']}")


if __name__ == "__main__":
    main()
