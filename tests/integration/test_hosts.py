"""The engine's guarantees hold on every LangGraph host it governs, not only ``create_agent``:
``create_react_agent`` given a ``GovernedToolNode`` and a hand-built ``StateGraph`` with one.
Racing decisions have one winner, two workers run an approved call once, an edit runs only the
edited arguments, a rejection's reason reaches the model, and a worker killed mid-tool leaves
the call to reconcile, never to run again; on real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import pytest

from approvals.model import DecisionRecord, ExecutionStatus
from tests.integration.helpers import side_effects
from tests.integration.inprocess import invoke
from tests.integration.processes import cli, spawn
from tests.waiting import eventually
from web.engine import Engine, open_engine
from web.settings import Settings

HOSTS = ("react_agent", "tool_node_graph")
GRAPHS = {name: f"tests.integration.middleware_graphs:{name}" for name in HOSTS}


@pytest.fixture
async def engine(database_url: str, tmp_path: Path) -> Any:
    settings = Settings(
        database_url=database_url, config_file=tmp_path / "none.toml", graphs=GRAPHS
    )
    async with open_engine(database_url, settings) as engine:
        yield engine


async def _start(engine: Engine, graph: str, message: str = "refund 1001 25") -> Any:
    out = await engine.runner.start(graph, {"message": message}, principal="alice")
    assert out.status == "waiting", out
    return out


async def _finished(engine: Engine, run_id: str) -> Any:
    run = await engine.runs.get(run_id)
    assert run is not None
    return run


@pytest.mark.parametrize("graph", HOSTS)
async def test_racing_decisions_have_one_winner_and_agree_with_what_ran(
    engine: Engine, graph: str
) -> None:
    for _ in range(3):
        out = await _start(engine, graph)
        results = await asyncio.gather(
            engine.decide_as_operator(out.pending[0], "approve", principal="ann"),
            engine.decide_as_operator(out.pending[0], "reject", principal="rob", reason="no"),
            return_exceptions=True,
        )
        won = [r for r in results if not isinstance(r, BaseException)]
        assert len(won) == 1, results
        assert isinstance(won[0], DecisionRecord)
        await engine.worker.drain()
        ran = len(await side_effects(engine, out.run_id, "refund-1001"))
        assert ran == (1 if won[0].kind == "approve" else 0)
        assert (await _finished(engine, out.run_id)).status == "completed"


@pytest.mark.parametrize("graph", HOSTS)
async def test_two_workers_draining_at_once_run_each_approved_call_once(
    engine: Engine, graph: str, database_url: str, tmp_path: Path
) -> None:
    runs = [await _start(engine, graph) for _ in range(4)]
    for out in runs:
        await engine.decide_as_operator(out.pending[0], "approve", principal="bob")
    settings = Settings(
        database_url=database_url, config_file=tmp_path / "none.toml", graphs=GRAPHS
    )
    async with open_engine(database_url, settings) as other:
        counts = await asyncio.gather(engine.worker.drain(), other.worker.drain())
    assert sum(counts) == 4
    for out in runs:
        assert len(await side_effects(engine, out.run_id, "refund-1001")) == 1
        assert (await _finished(engine, out.run_id)).status == "completed"


@pytest.mark.parametrize("graph", HOSTS)
async def test_an_edit_runs_only_the_edited_arguments_and_a_reason_reaches_the_model(
    engine: Engine, graph: str
) -> None:
    out = await _start(engine, graph)
    await engine.decide_as_operator(
        out.pending[0], "approve", principal="bob", args={"order_id": "1001", "amount": 10.0}
    )
    await engine.worker.drain()
    run = await _finished(engine, out.run_id)
    assert run.status == "completed", run
    # HumanInTheLoopMiddleware's edit notice, then the result.
    assert run.answer is not None
    assert run.answer.endswith("Tool response:\nrefunded 10.00 on 1001")
    [effect] = await side_effects(engine, out.run_id, "refund-1001")
    assert effect["args"]["amount"] == 10.0

    rejected = await _start(engine, graph)
    await engine.decide_as_operator(
        rejected.pending[0], "reject", principal="bob", reason="over the monthly limit"
    )
    await engine.worker.drain()
    run = await _finished(engine, rejected.run_id)
    assert run.status == "completed", run
    assert run.answer is not None
    assert "over the monthly limit" in run.answer
    assert await side_effects(engine, rejected.run_id, "refund-1001") == []


@pytest.mark.slow
@pytest.mark.parametrize("graph", HOSTS)
async def test_a_worker_killed_mid_tool_is_reconciled_never_rerun(
    engine: Engine, graph: str, cli_env: dict[str, str]
) -> None:
    out = await _start(engine, graph)
    await engine.decide_as_operator(out.pending[0], "approve", principal="bob")
    env = {
        **cli_env,
        "APPROVALS_GRAPHS": json.dumps(GRAPHS),
        "PYTHONPATH": str(Path(__file__).parents[2]),
    }
    worker = await spawn({**env, "APPROVALS_DEMO_TOOL_DELAY": "120"}, "worker")
    await eventually(lambda: side_effects(engine, out.run_id, "refund-1001"), timeout=60)
    worker.send_signal(signal.SIGKILL)
    await worker.wait()
    [started] = await engine.ledger.for_run(out.run_id)
    assert started.status is ExecutionStatus.STARTED

    assert (await cli(env, "worker", "--drain")).json() == {"resumed": 1}
    [unknown] = await engine.ledger.for_run(out.run_id)
    assert unknown.status is ExecutionStatus.OUTCOME_UNKNOWN
    [reconcile] = [r for r in await engine.requests.for_run(out.run_id) if r.status == "pending"]
    assert reconcile.tool == "@reconcile:issue_refund"
    await engine.decide_as_operator(reconcile.id, "approve", principal="olga")
    # The recovery above was a process of its own; resuming the reconciled call needs none.
    assert (await invoke(env, "worker", "--drain")).json() == {"resumed": 1}
    assert (await _finished(engine, out.run_id)).status == "completed"
    assert len(await side_effects(engine, out.run_id, "refund-1001")) == 1
