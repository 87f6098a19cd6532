"""Fault tests with real processes: SIGKILL at the points of a call's life that the other
process tests do not cover, and a PostgreSQL restart under load. Afterwards nothing is lost,
nothing ran twice, and every run is completed (or visibly waiting)."""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path

import httpx
import pytest

from approvals.model import ExecutionStatus
from storage.embedded import start_embedded, stop_embedded
from storage.migrate import upgrade
from tests.integration.helpers import person_token, side_effects, start_refund, until
from tests.integration.processes import cli, spawn
from tests.waiting import eventually
from web.engine import Engine, open_engine
from web.settings import Settings

pytestmark = pytest.mark.slow


async def read_url(server: asyncio.subprocess.Process) -> str:
    assert server.stdout is not None
    while True:
        line = (await asyncio.wait_for(server.stdout.readline(), 60)).decode()
        assert line, "the server ended before it served"
        found = re.search(r"serving (http://\S+)", line)
        if found:
            return found.group(1)


async def test_a_worker_killed_after_the_tool_before_its_checkpoint_does_not_rerun_it(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    run = await start_refund(engine)
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    paused = {**cli_env, "APPROVALS_FAULT_PAUSE_AFTER_TOOL": "120"}
    worker = await spawn(paused, "worker")

    async def recorded() -> bool:
        executions = {e.call_id: e.status for e in await engine.ledger.for_run(run.run_id)}
        return executions.get("refund-1001") is ExecutionStatus.SUCCEEDED

    # The tool ran and its result is in the ledger; the step's checkpoint is not written.
    await eventually(recorded, timeout=60)
    worker.send_signal(signal.SIGKILL)
    await worker.wait()
    waiting = await engine.runs.get(run.run_id)
    assert waiting is not None
    assert waiting.status == "waiting"

    assert (await cli(cli_env, "worker", "--drain")).json() == {"resumed": 1}
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1
    done = await engine.runs.get(run.run_id)
    assert done is not None
    assert done.status == "completed"
    assert done.answer == "Refunded 25.00 on order 1001."  # the result, replayed from the ledger


async def test_a_web_server_killed_after_a_decision_loses_nothing(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    run = await start_refund(engine)
    secret = await person_token(engine, "lead", "support")
    server = await spawn(cli_env, "serve", "--port", "0")
    try:
        url = await read_url(server)
        async with httpx.AsyncClient(
            base_url=url, headers={"authorization": f"Bearer {secret}"}, timeout=30
        ) as api:
            decided = await api.post(
                f"/api/v1/pending/{run.pending[0]}/decision", json={"decision": "approve"}
            )
        assert decided.status_code == 200, decided.text
    finally:
        server.send_signal(signal.SIGKILL)
        await server.wait()
    # The decision, its audit entry and its resume job were one transaction: a worker finds it.
    assert (await cli(cli_env, "worker", "--drain")).json() == {"resumed": 1}
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1
    done = await engine.runs.get(run.run_id)
    assert done is not None
    assert done.status == "completed"


async def test_a_web_server_killed_during_decisions_leaves_each_decided_once_or_pending(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    runs = [await start_refund(engine) for _ in range(6)]
    secret = await person_token(engine, "lead", "support")
    server = await spawn(cli_env, "serve", "--port", "0")
    url = await read_url(server)
    async with httpx.AsyncClient(
        base_url=url, headers={"authorization": f"Bearer {secret}"}, timeout=30
    ) as api:

        async def decide(request_id: str) -> int | None:
            try:
                response = await api.post(
                    f"/api/v1/pending/{request_id}/decision", json={"decision": "approve"}
                )
            except httpx.HTTPError:
                return None
            return response.status_code

        posts = [asyncio.create_task(decide(r.pending[0])) for r in runs]
        # The server is deciding: one decision is in, the others are on their way.
        await until(engine, "select count(*) > 0 from decisions", seconds=60)
        server.send_signal(signal.SIGKILL)
        await server.wait()
        statuses = await asyncio.gather(*posts)
    await cli(cli_env, "worker", "--drain")
    for run, status in zip(runs, statuses, strict=True):
        request = await engine.requests.get(run.pending[0])
        assert request is not None
        effects = len(await side_effects(engine, run.run_id, "refund-1001"))
        if status == 200:
            assert request.status == "approved"
        # Whatever the client saw, the database is consistent: decided and run once, or still
        # pending and not run.
        assert (request.status, effects) in {("approved", 1), ("pending", 0)}, (status, request)
        current = await engine.runs.get(run.run_id)
        assert current is not None
        assert current.status == ("completed" if request.status == "approved" else "waiting")


async def test_a_postgres_restart_under_load_loses_and_repeats_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "pg"
    url = start_embedded(data_dir)
    try:
        await upgrade(url)
        settings = Settings(database_url=url, data_dir=tmp_path, config_file=tmp_path / "x.toml")
        env = {
            "PATH": "/usr/bin:/bin",
            "APPROVALS_DATABASE_URL": url,
            "APPROVALS_DATA_DIR": str(tmp_path / "data"),
            "APPROVALS_CONFIG_FILE": str(tmp_path / "x.toml"),
            "APPROVALS_DEMO_TOOL_DELAY": "0.2",
            "APPROVALS_EXAMPLES": "true",
        }
        async with open_engine(url, settings) as engine:
            runs = [await start_refund(engine) for _ in range(8)]
        worker = await spawn(env, "worker")
        assert worker.stderr is not None
        said: list[str] = []  # the worker's log, line by line

        async def read_log(stream: asyncio.StreamReader) -> None:
            async for line in stream:
                said.append(line.decode(errors="replace"))

        reading = asyncio.create_task(read_log(worker.stderr))
        try:
            async with open_engine(url, settings) as engine:
                for run in runs[:4]:
                    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")

                async def resuming() -> bool:
                    effects = [await side_effects(engine, r.run_id, "refund-1001") for r in runs]
                    return any(effects)

                # The worker is resuming (a first refund went out) when the database goes away.
                try:
                    await eventually(resuming, timeout=60, interval=0.05)
                except AssertionError:
                    worker.kill()
                    await worker.wait()
                    await reading
                    raise AssertionError(f"no resume: {''.join(said)}") from None
            assert stop_embedded(data_dir)
            # The worker finds the database gone (and says it will retry) before it comes back.
            try:
                await eventually(
                    lambda: any("retrying in" in line for line in said),
                    timeout=60,
                    what="the worker to notice the database is gone",
                )
            except AssertionError as exc:
                raise AssertionError(f"{exc}; it said: {''.join(said)}") from None
            assert start_embedded(data_dir) == url
            async with open_engine(url, settings) as engine:
                for run in runs[4:]:
                    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")

                async def settled() -> bool:
                    """Every run completed, or waiting for an operator to reconcile a call the
                    restart interrupted (its outcome is unknown: it is never run again)."""
                    for r in runs:
                        run = await engine.runs.get(r.run_id)
                        if run is None or run.status not in ("completed", "waiting"):
                            return False
                        if run.status == "waiting" and not await reconcile_requests(r.run_id):
                            return False
                    return True

                async def reconcile_requests(run_id: str) -> list[str]:
                    return [
                        q.id
                        for q in await engine.requests.for_run(run_id)
                        if q.status == "pending" and q.tool.startswith("@reconcile:")
                    ]

                try:
                    await eventually(settled, timeout=90, interval=0.5)
                except AssertionError:
                    report = []
                    for r in runs:
                        run = await engine.runs.get(r.run_id)
                        requests = await engine.requests.for_run(r.run_id)
                        executions = await engine.ledger.for_run(r.run_id)
                        report.append(
                            (
                                run.status if run else None,
                                [(q.tool, q.status.value) for q in requests],
                                [e.status.value for e in executions],
                            )
                        )
                    jobs = await engine._db.all("queued_jobs", {})  # the raw queue, to explain
                    raise AssertionError(f"not settled: {report} queued: {jobs}") from None
                assert worker.returncode is None  # the worker rode out the restart
                # An operator reconciles what the restart interrupted: the refund went out.
                for run in runs:
                    for request_id in await reconcile_requests(run.run_id):
                        assert await side_effects(engine, run.run_id, "refund-1001")
                        await engine.decide_as_operator(request_id, "approve", principal="olga")

                async def all_completed() -> bool:
                    got = [await engine.runs.get(r.run_id) for r in runs]
                    return all(r is not None and r.status == "completed" for r in got)

                await eventually(all_completed, timeout=60, interval=0.5)
                for run in runs:
                    # Exactly once each: no run lost, no refund repeated.
                    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1
        finally:
            worker.send_signal(signal.SIGTERM)
            await asyncio.wait_for(worker.wait(), 60)
            await reading
    finally:
        stop_embedded(data_dir)
