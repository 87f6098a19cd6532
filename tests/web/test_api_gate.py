"""The API gate (web.deps.admitted_bearer): at most half the pool's worth of short API calls use
the database at once, and the surplus waits before touching anything. A run start is not
behind it: under the HTTP load bench, a start whose step waited behind 100 approvers' calls for
its decision read timed out and the run failed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from fastapi import FastAPI

from tests.integration.helpers import person_token, run_status, thread_lock, until
from tests.waiting import eventually
from web.app import create_app
from web.deps import gate_size
from web.engine import Engine
from web.settings import Settings


@dataclass(frozen=True)
class Served:
    app: FastAPI
    api: httpx.AsyncClient
    gate_size: int
    as_shop: dict[str, str]  # an agent's token: it starts runs (and may cancel its own)
    as_lead: dict[str, str]  # an approver's token


@asynccontextmanager
async def served(engine: Engine, database_url: str, tmp_path: Path) -> AsyncIterator[Served]:
    settings = Settings(
        database_url=database_url, data_dir=tmp_path, config_file=tmp_path / "none.toml"
    )
    app = create_app(settings, engine=engine, migrate=False)
    shop = await person_token(engine, "shop", "agents")
    lead = await person_token(engine, "lead", "support")
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://app", timeout=60) as api,
    ):
        yield Served(
            app,
            api,
            gate_size(settings),
            {"authorization": f"Bearer {shop}"},
            {"authorization": f"Bearer {lead}"},
        )
    assert gate_size(settings) == settings.pool_max_size // 2


async def start_refund_over_the_api(served: Served) -> dict[str, object]:
    started = await served.api.post(
        "/api/v1/runs",
        json={"graph": "refund", "input": {"message": "refund 1001"}},
        headers=served.as_shop,
    )
    assert started.status_code == 200, started.text
    run: dict[str, object] = started.json()
    assert run["status"] == "waiting"
    return run


async def test_short_calls_wait_at_the_gate_and_a_start_does_not(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    async with served(engine, database_url, tmp_path) as it:
        api, as_lead, size = it.api, it.as_lead, it.gate_size
        gate: asyncio.Semaphore = it.app.state.api_gate
        assert (await api.get("/api/v1/pending", headers=as_lead)).status_code == 200
        for _ in range(size):
            await gate.acquire()  # the gate is full: as many short calls as it admits
        listing = asyncio.create_task(api.get("/api/v1/pending", headers=as_lead))
        try:
            run = await start_refund_over_the_api(it)
            # It waits at the gate, not for the database: the gate's one waiter (a private
            # field of asyncio's, the one place that says who waits).
            await eventually(lambda: len(gate._waiters or ()) == 1, what="a listing at the gate")
            assert not listing.done()
        finally:
            for _ in range(size):
                gate.release()
        listed = await asyncio.wait_for(listing, 30)
        assert listed.status_code == 200
        assert [r["id"] for r in listed.json()] == run["pending"]
        # A refused token is still a 401 through the gate, and the gate is free afterwards.
        refused = await api.get("/api/v1/pending", headers={"authorization": "Bearer nope"})
        assert refused.status_code == 401
    assert not gate.locked()


async def test_cancels_waiting_for_a_busy_run_leave_the_gate_to_short_calls(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    """A cancel waits for the run's step in progress to settle (its thread's lock). A gate's
    worth of cancels of one busy run must not hold the gate: an approver's listing goes on
    while they wait, and once the step settles exactly one of them cancels the run."""
    async with served(engine, database_url, tmp_path) as it:
        run = await start_refund_over_the_api(it)
        async with thread_lock(engine, str(run["thread_id"])):  # a step is in progress
            cancels = [
                asyncio.create_task(
                    it.api.post(f"/api/v1/runs/{run['run_id']}/cancel", json={}, headers=it.as_shop)
                )
                for _ in range(it.gate_size)
            ]
            # The cancels admitted so far wait for the lock: none has finished.
            await until(
                engine,
                "select count(*) > 0 from pg_locks where locktype = 'advisory' and not granted"
                " and database = (select oid from pg_database where datname = current_database())",
            )
            listed = await asyncio.wait_for(it.api.get("/api/v1/pending", headers=it.as_lead), 30)
            assert listed.status_code == 200
            assert [r["id"] for r in listed.json()] == run["pending"]
            assert not any(c.done() for c in cancels)
        answers = sorted(c.status_code for c in await asyncio.gather(*cancels))
        assert answers == [200] + [409] * (it.gate_size - 1)
        assert await run_status(engine, str(run["run_id"])) == "cancelled"
