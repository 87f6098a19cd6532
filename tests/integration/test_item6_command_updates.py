"""A tool that returns ``Command(update=...)`` for state keys of the user's own keeps them, as
LangGraph's ``ToolNode`` does, whatever re-runs the step that ran it: a ``GovernedToolNode``
whose turn has two gated calls decided one at a time (the second call's pause discards the node
run that ran the first), or a worker killed after the tool ran and before its step was
checkpointed. Each call's update reaches the state once; on real PostgreSQL."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.prebuilt import ToolNode

from approvals.model import ExecutionStatus
from tests.integration import item6_graphs
from tests.integration.helpers import thread_values
from tests.integration.processes import spawn
from tests.waiting import eventually
from web.engine import Engine, open_engine
from web.settings import Settings

GRAPHS = {
    "credit": "tests.integration.item6_graphs:credit_governed",
    "credit_agent": "tests.integration.item6_graphs:credit_agent",
}
MESSAGE = "credit 1001 15 1002 5"


@pytest.fixture
async def engine(database_url: str, tmp_path: Path) -> Any:
    settings = Settings(
        database_url=database_url, config_file=tmp_path / "none.toml", graphs=GRAPHS
    )
    async with open_engine(database_url, settings) as engine:
        yield engine


_state = thread_values


async def _approve_one_at_a_time(engine: Engine, graph: str) -> dict[str, Any]:
    out = await engine.runner.start(graph, {"message": MESSAGE}, principal="alice")
    assert out.status == "waiting", out
    for call_id in ("credit-1001", "credit-1002"):
        [request] = [
            r
            for r in await engine.requests.for_run(out.run_id)
            if r.status == "pending" and r.call_id == call_id
        ]
        await engine.decide_as_operator(request.id, "approve", principal="bob")
        assert await engine.worker.drain() == 1
    run = await engine.runs.get(out.run_id)
    assert run is not None
    assert run.status == "completed", run
    ledger = await engine.ledger.for_run(out.run_id)
    assert sorted((e.call_id, e.status) for e in ledger) == [
        ("credit-1001", ExecutionStatus.SUCCEEDED),
        ("credit-1002", ExecutionStatus.SUCCEEDED),
    ]
    state = await _state(engine, graph, out.thread_id)
    results = {m.tool_call_id: m.content for m in state["messages"] if isinstance(m, ToolMessage)}
    assert results == {"credit-1001": "credited 15.00", "credit-1002": "credited 5.00"}
    return state


async def test_a_plain_tool_node_sums_both_calls_updates() -> None:
    """What the governed graphs must come to: the user's reducer sums both calls' credit."""
    graph = item6_graphs._credit_graph(ToolNode([item6_graphs.add_credit])).compile()
    state = await graph.ainvoke({"messages": [HumanMessage(content=MESSAGE)]})
    assert state["credit_total"] == 20.0
    assert sorted(state["notes"]) == ["credited 15.00 to 1001", "credited 5.00 to 1002"]


async def test_create_agent_keeps_both_calls_updates_approved_one_at_a_time(
    engine: Engine,
) -> None:
    # Each call is a task of its own there: the first one's writes are kept when the second
    # pauses.
    state = await _approve_one_at_a_time(engine, "credit_agent")
    assert state["credit_total"] == 20.0
    assert sorted(state["notes"]) == ["credited 15.00 to 1001", "credited 5.00 to 1002"]


async def test_a_governed_tool_node_keeps_both_calls_updates_approved_one_at_a_time(
    engine: Engine,
) -> None:
    # One task runs the turn's calls: approved, the first runs, then the second pauses, which
    # discards that task's output (the first call's update with it); when the second is
    # approved, the ledger answers for the first.
    state = await _approve_one_at_a_time(engine, "credit")
    assert state["credit_total"] == 20.0
    assert sorted(state["notes"]) == ["credited 15.00 to 1001", "credited 5.00 to 1002"]


@pytest.mark.slow
@pytest.mark.parametrize("graph", ["credit", "credit_agent"])
async def test_a_worker_killed_after_the_tool_ran_loses_no_update(
    engine: Engine, graph: str, cli_env: dict[str, str]
) -> None:
    out = await engine.runner.start(graph, {"message": "credit 1001 15"}, principal="alice")
    await engine.decide_as_operator(out.pending[0], "approve", principal="bob")
    env = {
        **cli_env,
        "APPROVALS_GRAPHS": json.dumps(GRAPHS),
        "PYTHONPATH": str(Path(__file__).parents[2]),
    }
    # The worker stops where the tool ran and the ledger recorded it, before the step's
    # checkpoint is written, and is killed there.
    worker = await spawn({**env, "APPROVALS_FAULT_PAUSE_AFTER_TOOL": "120"}, "worker")

    async def recorded() -> bool:
        ledger = await engine.ledger.for_run(out.run_id)
        return [e.status for e in ledger] == [ExecutionStatus.SUCCEEDED]

    try:
        await eventually(recorded, timeout=60)
    finally:
        worker.send_signal(signal.SIGKILL)
        await worker.wait()

    # The killed worker's claim (a row lock) goes once PostgreSQL notices its connection is
    # gone, a moment after the process: until then the job is skipped as held.
    async def resumed() -> bool:
        return await engine.worker.drain() == 1

    await eventually(resumed, timeout=30, what="the killed worker's claim to be released")
    run = await engine.runs.get(out.run_id)
    assert run is not None
    assert run.status == "completed", run
    state = await _state(engine, graph, out.thread_id)
    assert [m.content for m in state["messages"] if isinstance(m, ToolMessage)] == [
        "credited 15.00"
    ]
    assert state.get("credit_total") == 15.0
    assert state.get("notes") == ["credited 15.00 to 1001"]
