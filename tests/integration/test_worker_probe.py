"""``approvals worker --health-port``: a real worker process serves liveness and readiness over
HTTP; readiness names the graphs it resumes and turns 503 when its database goes away, while
liveness stays 200; SIGTERM stops the worker and its probe."""

from __future__ import annotations

import asyncio
import re
import signal

import httpx
import pytest

from storage.migrate import upgrade
from tests.db_pool import admin_statement as _admin
from tests.db_pool import with_database
from tests.integration.processes import spawn
from tests.waiting import eventually

pytestmark = pytest.mark.slow


async def probe_url(worker: asyncio.subprocess.Process) -> str:
    assert worker.stderr is not None
    said: list[str] = []
    while True:
        line = (await asyncio.wait_for(worker.stderr.readline(), 60)).decode()
        assert line, f"the worker ended before its probe served: {''.join(said)}"
        said.append(line)
        found = re.search(r"health probe at (http://\S+)/healthz", line)
        if found:
            return found.group(1)


async def test_the_probe_answers_and_readiness_follows_the_database(
    admin_url: str, cli_env: dict[str, str]
) -> None:
    # A database of the test's own, dropped under the running worker.
    name = "approvals_probe_test"
    await _admin(admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    await _admin(admin_url, f"CREATE DATABASE {name}")
    url = with_database(admin_url, name)
    await upgrade(url)
    env = {**cli_env, "APPROVALS_DATABASE_URL": url}
    worker = await spawn(env, "worker", "--health-port", "0")
    try:
        base = await probe_url(worker)
        async with httpx.AsyncClient(base_url=base, timeout=10) as probe:
            assert (await probe.get("/healthz")).json() == {"status": "ok"}
            ready = await probe.get("/readyz")
            assert ready.status_code == 200, ready.text
            body = ready.json()
            assert body["status"] == "ready"
            assert "refund" in body["graphs"]
            assert body["config_digest"].startswith("sha256:")
            assert (await probe.get("/metrics")).status_code == 404

            await _admin(admin_url, f"DROP DATABASE {name} WITH (FORCE)")

            async def not_ready() -> bool:
                return (await probe.get("/readyz")).status_code == 503

            await eventually(not_ready, timeout=30, what="readiness to notice the database gone")
            gone = (await probe.get("/readyz")).json()
            assert gone["status"] == "unavailable"
            assert gone["reason"]
            # The process still lives: liveness is not readiness.
            assert (await probe.get("/healthz")).status_code == 200
        worker.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(worker.wait(), 30) == 0
    finally:
        if worker.returncode is None:
            worker.kill()
            await worker.wait()
        await _admin(admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
