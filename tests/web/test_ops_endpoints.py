"""/metrics, /healthz and /readyz over real HTTP, against the app's own database."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest
from pydantic import SecretStr

from storage.migrate import schema_heads
from tests.integration.helpers import person_token, start_refund
from tests.waiting import eventually, eventually_sync
from tests.web.conftest import Server
from web.engine import Engine
from web.settings import Settings

METRICS_TOKEN = "metrics-token-" + "m" * 16
SAMPLE = re.compile(r'^([a-z_]+)(?:\{([a-z_]+="[^"]*"(?:,[a-z_]+="[^"]*")*)\})? (\S+)$')


@pytest.fixture
def web_settings(database_url: str, tmp_path: Path) -> Settings:
    """The shared web settings, with /metrics behind a bearer token."""
    return Settings(
        database_url=database_url,
        data_dir=tmp_path,
        config_file=tmp_path / "none.toml",
        secret_key="test-secret-key-" + "x" * 32,
        metrics_token=SecretStr(METRICS_TOKEN),
    )


def scrape(server: Server) -> dict[str, float]:
    """The exposition, checked line by line, as {'name{labels}': value}."""
    response = httpx.get(
        f"{server.url}/metrics",
        headers={"authorization": f"Bearer {METRICS_TOKEN}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples: dict[str, float] = {}
    typed: set[str] = set()
    for line in response.text.splitlines():
        if line.startswith("# TYPE "):
            name, kind = line.split()[2:4]
            assert kind in {"gauge", "counter", "histogram"}
            typed.add(name)
            continue
        if line.startswith("# HELP "):
            continue
        match = SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        name, labels, value = match.groups()
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in typed or family in typed, f"{name} has no TYPE line"
        samples[f"{name}{{{labels}}}" if labels else name] = float(value)
    return samples


#: The backends still starting up on the named database: PostgreSQL's InitPostgres holds a lock
#: on the database from before it reads ALLOW_CONNECTIONS until after pg_stat_activity lists it.
STARTING_UP = """
SELECT pid FROM pg_locks
 WHERE locktype = 'object' AND database = 0 AND classid = 'pg_database'::regclass
   AND objid = (SELECT oid FROM pg_database WHERE datname = %s)
"""


def refuse_connections(admin: psycopg.Connection[Any], name: str) -> None:
    """Make database ``name`` refuse new connections and end every one it has: on return no
    client is connected to it, and none can connect."""
    admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
    # A backend admitted just before the ALTER may not show in pg_stat_activity yet (the
    # served app's worker and pool open connections as it starts): terminating only those
    # listed there let it live, and /readyz answered 200 on it. Wait until no backend is
    # starting up (any that starts from now on is refused), then end those listed.
    eventually_sync(
        lambda: admin.execute(STARTING_UP, (name,)).fetchone() is None,
        what=f"no backend starting up on {name}",
    )
    # With a timeout, pg_terminate_backend returns once the backend has exited. Client
    # backends only: an autovacuum worker may still start on a database that refuses clients.
    admin.execute(
        "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
        " WHERE datname = %s AND backend_type = 'client backend'",
        (name,),
    )
    left = admin.execute(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = %s AND backend_type = 'client backend'",
        (name,),
    ).fetchone()
    assert left == (0,), f"connections to {name} outlived pg_terminate_backend: {left}"


def test_healthz_answers_without_the_database(server: Server) -> None:
    response = httpx.get(f"{server.url}/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_is_ready_at_head(server: Server) -> None:
    response = httpx.get(f"{server.url}/readyz")
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "ready"
    # The newest revision in alembic/versions (the migrations the test database was built by).
    assert response.json()["revision"] == schema_heads()[0]
    # What this process serves, and the digest every process of a rollout should agree on.
    assert "refund" in response.json()["graphs"]
    assert response.json()["config_digest"].startswith("sha256:")


def test_readyz_is_503_while_the_database_refuses_connections(
    server: Server, admin_url: str, database_url: str
) -> None:
    name = urlsplit(database_url).path.lstrip("/")
    with psycopg.connect(admin_url, autocommit=True) as admin:
        try:
            # The app's pool can reach nothing: no connection to keep, none to make.
            refuse_connections(admin, name)
            response = httpx.get(f"{server.url}/readyz", timeout=30)
            assert response.status_code == 503, response.text
            assert response.json()["status"] == "unavailable"
            assert response.json()["reason"]
            assert httpx.get(f"{server.url}/healthz").status_code == 200
        finally:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')

    def ready() -> bool:
        return httpx.get(f"{server.url}/readyz", timeout=30).status_code == 200

    eventually_sync(ready, what="/readyz to answer 200 again")


def test_metrics_need_the_token_when_one_is_set(server: Server) -> None:
    assert httpx.get(f"{server.url}/metrics").status_code == 401
    wrong = httpx.get(f"{server.url}/metrics", headers={"authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert wrong.headers["www-authenticate"] == "Bearer"
    assert "/metrics" not in httpx.get(f"{server.url}/api/openapi.json").text


async def test_metrics_follow_a_request_its_decision_and_the_resume(
    server: Server, engine: Engine
) -> None:
    empty = await asyncio.to_thread(scrape, server)
    assert empty["approvals_pending_requests"] == 0
    assert empty['approvals_decisions_total{kind="approve"}'] == 0
    assert empty["approvals_decision_latency_seconds_count"] == 0
    assert empty['approvals_decision_latency_seconds_bucket{le="+Inf"}'] == 0
    assert empty["approvals_resume_queue_depth"] == 0
    assert empty['approvals_failures{kind="outcome_unknown"}'] == 0

    run = await start_refund(engine)
    waiting = await asyncio.to_thread(scrape, server)
    assert waiting["approvals_pending_requests"] == 1
    assert waiting['approvals_requests{status="pending"}'] == 1
    assert waiting['approvals_runs{status="waiting"}'] == 1
    assert waiting["approvals_oldest_pending_request_age_seconds"] >= 0

    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")

    async def resumed() -> bool:
        got = await asyncio.to_thread(scrape, server)
        return got['approvals_runs{status="completed"}'] == 1

    # The server's own worker resumes the run.
    await eventually(resumed, what="the served worker to complete the run")
    done = await asyncio.to_thread(scrape, server)
    assert done["approvals_pending_requests"] == 0
    assert done['approvals_decisions_total{kind="approve"}'] == 1
    assert done["approvals_decision_latency_seconds_count"] == 1
    assert done['approvals_decision_latency_seconds_bucket{le="+Inf"}'] == 1
    assert done["approvals_decision_latency_seconds_sum"] > 0
    assert done["approvals_resume_latency_seconds_count"] == 1
    assert done['approvals_resume_jobs{status="done"}'] == 1
    assert done["approvals_resume_queue_depth"] == 0
    # Buckets are cumulative: never fewer for a larger bound.
    buckets = [
        (float(m.group(1).replace("+Inf", "inf")), v)
        for k, v in done.items()
        if (m := re.fullmatch(r'approvals_resume_latency_seconds_bucket\{le="(.+)"\}', k))
    ]
    counts = [v for _, v in sorted(buckets)]
    assert counts == sorted(counts)
    assert counts[-1] == 1


async def test_metrics_name_a_queued_resume_no_live_worker_serves(
    server: Server, engine: Engine
) -> None:
    run = await start_refund(engine)
    # A run of a graph no worker serves (registered only on processes of another release).
    async with engine.connection() as conn:
        await conn.execute("UPDATE runs SET graph = 'crm' WHERE id = %s", (run.run_id,))
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")

    async def named() -> bool:
        got = await asyncio.to_thread(scrape, server)
        return got.get('approvals_resume_jobs_unserved{graph="crm"}') == 1

    await eventually(named, what="the metric to name the graph no live worker serves")
    # The run says so too, to whoever may read it.
    secret = await person_token(engine, "olga", "operators")
    shown = httpx.get(
        f"{server.url}/api/v1/runs/{run.run_id}",
        headers={"authorization": f"Bearer {secret}"},
        timeout=30,
    )
    assert shown.status_code == 200, shown.text
    assert shown.json()["waiting_for_worker"] is True
