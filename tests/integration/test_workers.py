"""Live workers say which graphs they serve (``workers``, migration 0035): a queued resume whose
graph no live worker serves is named (``approvals status``, the ``approvals_resume_jobs_unserved``
metric) instead of waiting with only a worker's log line to say why."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.helpers import scalar, start_refund
from tests.integration.inprocess import invoke
from tests.waiting import eventually
from web.engine import Engine
from web.engine.workers import live_workers, unserved_jobs

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_working_worker_is_live_and_a_stopped_one_is_gone(engine: Engine) -> None:
    stop = asyncio.Event()
    working = asyncio.create_task(engine.work(stop))
    try:

        async def seen() -> bool:
            return bool(await live_workers(engine.adapters.db))

        await eventually(seen, timeout=30, what="the worker's first heartbeat")
        [worker] = await live_workers(engine.adapters.db)
        assert set(worker.graphs) == set(engine.agent_names())
        assert worker.config_digest == engine.registry.config_digest()
    finally:
        stop.set()
        await asyncio.wait_for(working, 30)
    assert await live_workers(engine.adapters.db) == []
    assert await scalar(engine, "SELECT count(*) FROM workers") == 0


async def test_a_queued_resume_no_live_worker_serves_is_named(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    run = await start_refund(engine)
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    # A run of a graph no worker serves (registered only on processes of another release).
    async with engine.connection() as conn:
        await conn.execute("UPDATE runs SET graph = 'crm' WHERE id = %s", (run.run_id,))
    # No live worker at all: the job waits for one.
    assert await unserved_jobs(engine.adapters.db) == {"crm": 1}
    stop = asyncio.Event()
    working = asyncio.create_task(engine.work(stop))
    try:

        async def seen() -> bool:
            return bool(await live_workers(engine.adapters.db))

        await eventually(seen, timeout=30, what="the worker's first heartbeat")
        # A live worker that serves refund and email, not crm: still unserved.
        assert await unserved_jobs(engine.adapters.db) == {"crm": 1}
        status = (await invoke(cli_env, "status", "--json")).json()
        assert status["no_live_worker"] == {"crm": 1}
        assert [set(w["graphs"]) for w in status["workers"]] == [set(engine.agent_names())]
    finally:
        stop.set()
        await asyncio.wait_for(working, 30)


async def test_runs_show_says_a_decided_run_waits_for_a_worker_of_its_graph(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    run = await start_refund(engine)
    waiting = (await invoke(cli_env, "runs", "show", run.run_id, "--json")).json()
    assert waiting["waiting_for_worker"] is False  # it waits for a human
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    async with engine.connection() as conn:
        await conn.execute("UPDATE runs SET graph = 'crm' WHERE id = %s", (run.run_id,))
    shown = await invoke(cli_env, "runs", "show", run.run_id)
    assert "waiting for a worker that serves 'crm': no live worker does" in shown.stdout
