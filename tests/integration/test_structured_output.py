"""A ``create_agent`` structured answer (``response_format``) under ``ApprovalMiddleware`` is
the agent's output: ``output`` policies judge it, a transform rewrites every copy of it in the
state, a deny keeps it nowhere, a human may read it first; on real PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.structured_graphs import CARD, RefundSummary
from web.engine import Engine, open_engine
from web.settings import Settings

GRAPHS = {
    name: f"tests.integration.structured_graphs:{name}"
    for name in ("tool_strategy", "provider_strategy", "denied", "reviewed", "broken")
}


@pytest.fixture
async def lc(database_url: str, tmp_path: Path) -> Any:
    settings = Settings(
        database_url=database_url, config_file=tmp_path / "none.toml", graphs=GRAPHS
    )
    async with open_engine(database_url, settings) as engine:
        yield engine


async def _refund_approved(engine: Engine, graph: str) -> Any:
    """Starts a refund, approves it, and returns the run after the worker resumed it."""
    out = await engine.runner.start(graph, {"message": "refund 1001 25"}, principal="alice")
    assert out.status == "waiting", out
    [request_id] = out.pending
    await engine.decide_as_operator(request_id, "approve", principal="bob")
    assert await engine.worker.drain() == 1
    run = await engine.runs.get(out.run_id)
    assert run is not None
    return out, run


async def _state(engine: Engine, graph: str, thread_id: str) -> dict[str, Any]:
    snapshot = await engine.registry.get(graph).aget_state(
        {"configurable": {"thread_id": thread_id}}
    )
    return dict(snapshot.values)


@pytest.mark.parametrize("graph", ["tool_strategy", "provider_strategy"])
async def test_the_structured_answer_is_masked_everywhere_the_state_holds_it(
    lc: Engine, graph: str
) -> None:
    out, run = await _refund_approved(lc, graph)
    assert run.status == "completed", run
    assert json.loads(run.answer) == {
        "order_id": "1001",
        "amount": 25.0,
        "note": "refunded 25.00 on 1001; card [card]",
    }
    state = await _state(lc, graph, out.thread_id)
    answer = state["structured_response"]
    assert isinstance(answer, RefundSummary)
    assert answer.note.endswith("card [card]")
    # Not in the model's call of the schema's tool, its confirmation, or the JSON content.
    assert CARD not in repr(state["messages"])


async def test_a_denied_structured_answer_blocks_the_run_and_is_kept_nowhere(lc: Engine) -> None:
    out, run = await _refund_approved(lc, "denied")
    assert run.status == "blocked", run
    assert run.error is not None
    assert "the answer quotes a card number" in run.error
    graph = lc.registry.get("denied")
    async for snapshot in graph.aget_state_history({"configurable": {"thread_id": out.thread_id}}):
        assert CARD not in repr(snapshot.values.get("messages", []))
        assert snapshot.values.get("structured_response") is None


async def test_a_structured_answer_a_human_must_read_waits_and_then_completes(
    lc: Engine,
) -> None:
    out, run = await _refund_approved(lc, "reviewed")
    assert run.status == "waiting", run
    [review] = [r for r in await lc.requests.for_run(out.run_id) if r.status == "pending"]
    assert review.tool == "@output"
    # The approver reads the answer as its fields, not as a tool call.
    assert review.shown["content"]["order_id"] == "1001"
    await lc.decide_as_operator(review.id, "approve", principal="bob")
    assert await lc.worker.drain() == 1
    done = await lc.runs.get(out.run_id)
    assert done is not None
    assert done.status == "completed", done
    assert done.answer is not None
    assert json.loads(done.answer)["note"].endswith(f"card {CARD}")


async def test_a_rewrite_the_answers_type_refuses_stops_the_run_naming_the_field(
    lc: Engine,
) -> None:
    out, run = await _refund_approved(lc, "broken")
    assert run.status == "blocked", run
    assert run.error is not None
    assert "RefundSummary refuses (order_id: Field required)" in run.error
    state = await _state(lc, "broken", out.thread_id)
    assert state.get("structured_response") is None
