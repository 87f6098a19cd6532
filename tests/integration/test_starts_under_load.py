"""A busy pool slows a start down; it never fails it (issue 37, item 4).

Under ``bench/http_load.py`` one API-started run per bench run ended ``failed`` with "could not
read the decision for pre_tool_call": the pool's queue was deeper than the emitter's bound on
the approval slot, the slot's read was cancelled, and nothing retries a start. Now the slot
keeps its read in the queue and is asked again (``graphs.hooks.flights``), and a start that
finds no place among the runs a process starts at once waits a bounded time, then is refused
before anything of it is written (``web.engine.starts``): a 503 with Retry-After.

The graphs wait at a gate the test opens (``starts_under_load_graphs``), so that the test
decides what the pool holds while a step runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from approvals.errors import StartsBusy
from tests.integration.helpers import person_token, scalar
from tests.integration.starts_under_load_graphs import GATE, GRAPHS
from tests.waiting import eventually
from tests.web.conftest import serving
from web.engine import Engine, open_engine
from web.settings import Settings


def load_settings(database_url: str, tmp_path: Path, **changes: Any) -> Settings:
    """Six connections: a process starts at most (6 - 2) / 2 = 2 runs at once."""
    return Settings(
        database_url=database_url,
        data_dir=tmp_path,
        config_file=tmp_path / "none.toml",
        pool_max_size=6,
        worker_concurrency=2,
        graphs=GRAPHS,
        **changes,
    )


@pytest.fixture(autouse=True)
def closed_gate() -> None:
    GATE.reset()


@asynccontextmanager
async def every_free_connection(pool: AsyncConnectionPool[Any]) -> AsyncIterator[int]:
    """Hold every connection of ``pool`` nobody holds, for the block: what a burst of other
    requests (decisions, inbox pages) does to the pool. Yields how many."""
    held = []
    try:
        while True:
            try:
                held.append(await pool.getconn(timeout=0.3))
            except PoolTimeout:
                break
        yield len(held)
    finally:
        for conn in held:
            await pool.putconn(conn)


async def count(engine: Engine, query: str) -> int:
    return int(await scalar(engine, query))


async def test_a_start_whose_request_waits_long_for_the_pool_pauses_instead_of_failing(
    database_url: str, tmp_path: Path
) -> None:
    """The bench's failure, made on purpose: the step reaches its approval while every other
    connection is taken, for longer than the emitter gives the approval slot (2 s here)."""
    async with open_engine(database_url, load_settings(database_url, tmp_path)) as engine:
        start = asyncio.create_task(
            engine.start_run("gated_briefly", {"message": "refund 1001"}, principal="shop")
        )
        await eventually(lambda: GATE.arrived == 1, what="the step to reach its tool call")
        async with every_free_connection(engine.adapters.db.pool) as taken:
            assert taken >= 1
            GATE.open()
            # The point is time: the pool stays taken longer than the slot's 2 s bound (the
            # request's opening waits at the head of its queue meanwhile).
            await asyncio.sleep(3.5)
        outcome = await asyncio.wait_for(start, 60)
        assert outcome.status == "waiting", outcome.error
        assert await count(engine, "SELECT count(*) FROM runs WHERE status = 'failed'") == 0
        assert await count(engine, "SELECT count(*) FROM runs") == 1
        pending = "SELECT count(*) FROM approval_requests WHERE status = 'pending'"
        assert await count(engine, pending) == 1
        assert await count(engine, "SELECT count(*) FROM approval_requests") == 1


async def test_starts_beyond_what_the_pool_serves_wait_then_are_refused_leaving_no_trace(
    database_url: str, tmp_path: Path
) -> None:
    """Six starts at once where two fit: two run (held at the gate); the other four wait a
    second for a place, then are refused with nothing written. The two then pause, each with
    its request, and nothing ran."""
    settings = load_settings(database_url, tmp_path, start_wait_seconds=1.0)
    async with open_engine(database_url, settings) as engine:
        starts = [
            asyncio.create_task(
                engine.start_run("gated", {"message": f"refund 100{1 + i % 2}"}, principal="shop")
            )
            for i in range(6)
        ]
        await eventually(lambda: GATE.arrived == 2, what="two steps to reach their tool calls")
        await eventually(
            lambda: sum(t.done() for t in starts) == 4, what="four starts to be refused"
        )
        assert GATE.arrived == 2
        GATE.open()
        results = await asyncio.wait_for(asyncio.gather(*starts, return_exceptions=True), 120)
        refused = [r for r in results if isinstance(r, StartsBusy)]
        accepted = [r for r in results if not isinstance(r, BaseException)]
        assert len(refused) == 4, results
        assert all(r.retry_after == 1 for r in refused)
        assert sorted(o.status for o in accepted) == ["waiting", "waiting"]
        ids = sorted(o.run_id for o in accepted)

        async def column(query: str) -> list[Any]:
            async with engine.connection() as conn:
                rows = await (await conn.execute(query)).fetchall()
            return sorted(next(iter(row.values())) for row in rows)

        # Only the accepted runs left anything: their rows, their checkpoints, their
        # requests (one pending each), their audit events. No refund ran; nothing ran twice.
        assert [str(r) for r in await column("SELECT id FROM runs")] == ids
        threads = await column("SELECT DISTINCT thread_id FROM checkpoints")
        assert threads == sorted(o.thread_id for o in accepted)
        requests = await column("SELECT run_id FROM approval_requests WHERE status = 'pending'")
        assert [str(r) for r in requests] == ids
        assert await count(engine, "SELECT count(*) FROM approval_requests") == 2
        audited = await column("SELECT DISTINCT run_id FROM audit_events WHERE run_id IS NOT NULL")
        assert set(map(str, audited)) <= set(ids)
        refunds = "SELECT count(*) FROM tool_executions WHERE tool = 'issue_refund'"
        assert await count(engine, refunds) == 0
        executed = await column("SELECT DISTINCT run_id FROM tool_executions")
        assert set(map(str, executed)) <= set(ids)
        twice = "SELECT count(*) FROM tool_executions GROUP BY run_id, call_id HAVING count(*) > 1"
        assert await column(twice) == []


async def test_the_api_refuses_a_start_it_has_no_place_for_with_503_and_retry_after(
    database_url: str, tmp_path: Path, engine: Engine
) -> None:
    secret = await person_token(engine, "shop", "agents")
    settings = load_settings(
        database_url, tmp_path, start_wait_seconds=0.5, secret_key="test-secret-key-" + "x" * 32
    )
    headers = {"authorization": f"Bearer {secret}"}
    body = {"graph": "gated", "input": {"message": "refund 1001"}}
    with serving(settings) as server:
        async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as api:
            held = [asyncio.create_task(api.post("/api/v1/runs", json=body)) for _ in range(2)]
            await eventually(lambda: GATE.arrived == 2, what="two runs to hold the places")
            refused = await api.post("/api/v1/runs", json=body, timeout=30)
            GATE.open()
            started = await asyncio.gather(*held)
    assert refused.status_code == 503, refused.text
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == "unavailable"
    assert "too many runs are starting at once" in refused.json()["error"]["message"]
    assert [s.status_code for s in started] == [200, 200]
    assert [s.json()["status"] for s in started] == ["waiting", "waiting"]
    assert await count(engine, "SELECT count(*) FROM runs") == 2
