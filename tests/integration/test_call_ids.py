"""A call id names one call of one run: a model that reuses one, or repeats one in a turn, gets
a clear error for it, nothing runs under a borrowed id, and the run never sticks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from approvals.model import ExecutionStatus
from tests.integration.call_id_graphs import GRAPHS
from tests.integration.helpers import scalar, side_effects, start_refund
from web.engine import Engine, open_engine
from web.settings import Settings


@pytest.fixture
async def scripted(database_url: str, tmp_path: Path) -> AsyncIterator[Engine]:
    settings = Settings(
        database_url=database_url, config_file=tmp_path / "none.toml", graphs=GRAPHS
    )
    async with open_engine(database_url, settings) as engine:
        yield engine


async def results(engine: Engine, graph: str, thread_id: str) -> list[ToolMessage]:
    """The tool results in the thread's final state, in order."""
    state = await engine.registry.get(graph).aget_state({"configurable": {"thread_id": thread_id}})
    return [m for m in state.values["messages"] if isinstance(m, ToolMessage)]


def error_of(message: ToolMessage) -> dict[str, Any]:
    error = json.loads(str(message.content))["error"]
    assert isinstance(error, dict)
    return error


async def test_a_call_id_reused_with_other_arguments_never_runs_and_asks_nobody(
    scripted: Engine,
) -> None:
    out = await scripted.runner.start("reused_call_id", {"message": "pay"}, principal="ann")
    [first] = out.pending
    await scripted.decide_as_operator(first, "approve", principal="bob")
    await scripted.worker.drain()

    run = await scripted.runs.get(out.run_id)
    assert run is not None
    assert run.status == "completed", run
    # The second "pay-1" (20.00) was refused before any human was asked: one request only.
    requests = await scripted.requests.for_run(out.run_id)
    assert [(r.call_id, r.shown["args"]) for r in requests] == [("pay-1", {"amount": 10.0})]
    # The tool ran once, for the approved call, and the ledger holds that call only.
    effects = await side_effects(scripted, out.run_id, "pay-1")
    assert [e["args"] for e in effects] == [{"amount": 10.0}]
    [execution] = await scripted.ledger.for_run(out.run_id)
    assert execution.status is ExecutionStatus.SUCCEEDED
    assert execution.args_identity == requests[0].identity
    # The model got the first call's result once, then an error naming the reused id (never
    # the first call's result replayed for the other arguments).
    paid, reused = await results(scripted, "reused_call_id", out.thread_id)
    assert json.loads(str(paid.content)) == {"paid": 10.0}
    assert reused.tool_call_id == "pay-1"
    assert reused.status == "error"
    error = error_of(reused)
    assert (error["code"], error["call_id"]) == ("call_id_reused", "pay-1")
    assert "'pay-1'" in error["message"]


async def test_a_turn_that_repeats_a_call_id_runs_none_of_its_calls(scripted: Engine) -> None:
    out = await scripted.runner.start("duplicate_call_ids", {"message": "pay"}, principal="ann")
    # Nobody was asked, nothing ran, and the run went on to its answer (never stuck).
    assert out.status == "completed", out
    assert out.pending == []
    run = await scripted.runs.get(out.run_id)
    assert run is not None
    assert run.status == "completed"
    assert await scripted.requests.for_run(out.run_id) == []
    assert await scripted.ledger.for_run(out.run_id) == []
    count = "select count(*) from demo_side_effects where run_id = %s"
    assert await scalar(scripted, count, out.run_id) == 0
    # Exactly one result per distinct id, each an error naming the repeated id.
    answered = await results(scripted, "duplicate_call_ids", out.thread_id)
    assert sorted(m.tool_call_id for m in answered) == ["pay-1", "pay-2"]
    for message in answered:
        error = error_of(message)
        assert (error["code"], error["call_ids"]) == ("duplicate_call_id", ["pay-1"])
        assert "no call of this turn ran" in error["message"]


async def test_a_ledger_row_of_other_arguments_is_neither_replayed_nor_run(
    engine: Engine,
) -> None:
    # The ledger's own guard, for a reuse nothing upstream caught: the call id already has an
    # execution, recorded for other arguments.
    run = await start_refund(engine)
    await engine.ledger.begin(
        run_id=run.run_id,
        call_id="refund-1001",
        tool="issue_refund",
        key="k-other",
        args_identity="jcs-sha256:other-arguments",
    )
    await engine.ledger.finish(
        run_id=run.run_id,
        call_id="refund-1001",
        status=ExecutionStatus.SUCCEEDED,
        result={"refund_id": "rf_other", "order_id": "1001", "amount": 1.0},
    )
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    await engine.worker.drain()
    assert await side_effects(engine, run.run_id, "refund-1001") == []
    done = await engine.runs.get(run.run_id)
    assert done is not None
    assert done.status == "completed"
    [result] = [
        m for m in await results(engine, "refund", run.thread_id) if m.tool_call_id == "refund-1001"
    ]
    assert "rf_other" not in str(result.content)
    assert error_of(result)["code"] == "call_id_reused"
    # The refusal is in the decision log beside the approval that did not run.
    events = [e for e in await engine.audit.for_run(run.run_id) if e["kind"] == "tool.refused"]
    assert [(e["call_id"], e["data"]["reason"]) for e in events] == [
        ("refund-1001", "call_id_reused")
    ]
    assert events[0]["data"]["executed_identity"] == "jcs-sha256:other-arguments"
    # The first execution's record is untouched.
    executions = {e.call_id: e for e in await engine.ledger.for_run(run.run_id)}
    execution = executions["refund-1001"]
    assert (execution.args_identity, execution.status) == (
        "jcs-sha256:other-arguments",
        ExecutionStatus.SUCCEEDED,
    )


async def test_a_start_whose_step_fails_on_the_database_ends_failed_not_running(
    scripted: Engine,
) -> None:
    # What two calls sharing an id once did: the step failed as "database unavailable" while
    # the database was there, and the run stayed "running" with nothing left to go on with it.
    out = await scripted.runner.start("unreadable_decision", {"message": "pay"}, principal="ann")
    assert out.status == "failed", out
    assert out.error is not None
    assert "could not read the decision for pre_tool_call" in out.error
    run = await scripted.runs.get(out.run_id)
    assert run is not None
    assert (run.status, run.error) == ("failed", out.error)
    count = "select count(*) from demo_side_effects where run_id = %s"
    assert await scalar(scripted, count, out.run_id) == 0
