"""Validation that travels with a tool: preconditions before anyone is asked, postconditions
after it ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from approvals.decisions import decide
from approvals.errors import EditRefused
from approvals.model import DecisionRecord, ExecutionStatus
from tests.integration.helpers import scalar, side_effects, start_refund
from web.engine import Engine, open_engine
from web.settings import Settings


@pytest.fixture
async def conditions_engine(database_url: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    settings = Settings(
        database_url=database_url,
        config_file=tmp_path / "none.toml",
        graphs={"conditions": "tests.integration.custom_graphs:build_with_conditions"},
    )
    async with open_engine(database_url, settings) as engine:
        yield engine


async def test_a_failed_precondition_is_refused_before_anyone_is_asked(
    conditions_engine: Engine,
) -> None:
    out = await conditions_engine.runner.start(
        "conditions", {"message": "pay 500"}, principal="ann"
    )
    assert out.status == "completed"
    assert out.pending == []
    assert out.answer is not None
    assert "precondition_failed" in out.answer
    assert "within_budget" in out.answer
    assert "At most 100 per payment." in out.answer
    assert await scalar(conditions_engine, "select count(*) from approval_requests") == 0
    assert await scalar(conditions_engine, "select count(*) from demo_side_effects") == 0


async def test_a_failed_postcondition_is_recorded_reported_and_never_rerun(
    conditions_engine: Engine,
) -> None:
    out = await conditions_engine.runner.start("conditions", {"message": "pay 5"}, principal="ann")
    await conditions_engine.decide_as_operator(out.pending[0], "approve", principal="bob")
    await conditions_engine.worker.drain()
    run = await conditions_engine.runs.get(out.run_id)
    assert run is not None
    assert run.answer is not None
    assert "postcondition receipt_issued failed: no receipt came back" in run.answer
    executions = await conditions_engine.ledger.for_run(out.run_id)
    assert [e.status for e in executions] == [ExecutionStatus.SUCCEEDED]
    assert executions[0].error is not None
    assert len(await side_effects(conditions_engine, out.run_id, "pay-0")) == 1


async def test_an_edit_that_breaks_a_precondition_does_not_run(engine: Engine) -> None:
    run = await start_refund(engine)  # order 1001, 25.00 paid
    edited = {"order_id": "1001", "amount": 250.0, "reason": "typo"}
    # Refused when it is decided, naming the condition; the request stays pending.
    with pytest.raises(EditRefused, match="amount_within_paid"):
        await engine.decide_as_operator(run.pending[0], "approve", principal="bob", args=edited)

    async def accept_anything(_request: Any, args: dict[str, Any]) -> dict[str, Any]:
        return args

    # And checked again before it runs, for an edit that got past the decision's check.
    decision = await decide(
        engine.requests,
        engine.decisions,
        run.pending[0],
        "approve",
        principal="bob",
        args=edited,
        recheck=accept_anything,
    )
    assert isinstance(decision, DecisionRecord)
    assert decision.kind == "edit"
    await engine.worker.drain()
    assert await side_effects(engine, run.run_id, "refund-1001") == []
    finished = await engine.runs.get(run.run_id)
    assert finished is not None
    assert finished.status == "completed"
    assert finished.answer is not None
    assert "precondition_failed" in finished.answer
    assert "250.00 is more than the 25.00 paid" in finished.answer
