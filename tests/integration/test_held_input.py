"""An input a human must read, for a graph that cannot pause for it (an ``ApprovalMiddleware``
agent nested in the user's graph, a graph governed only by a ``GovernedToolNode``): the runner
holds it. The run waits on the input's request with nothing of the message in the thread; an
approval starts the graph with it, a rejection ends the run blocked; on real PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from approvals.errors import ThreadBusy
from tests.integration.helpers import scalar, side_effects
from web.engine import Engine, open_engine
from web.settings import Settings

HELD = ("nested_escalate_input", "tool_node_escalate_input")


@pytest.fixture
async def engine(database_url: str, tmp_path: Path) -> Any:
    settings = Settings(
        database_url=database_url,
        config_file=tmp_path / "none.toml",
        graphs={n: f"tests.integration.middleware_graphs:{n}" for n in HELD},
    )
    async with open_engine(database_url, settings) as engine:
        yield engine


async def _pending(engine: Engine, run_id: str) -> list[Any]:
    return [r for r in await engine.requests.for_run(run_id) if r.status == "pending"]


async def _messages(engine: Engine, graph: str, thread_id: str) -> list[Any]:
    state = await engine.registry.get(graph).aget_state({"configurable": {"thread_id": thread_id}})
    return list(state.values.get("messages") or [])


@pytest.mark.parametrize("graph", HELD)
async def test_a_held_input_waits_unread_by_the_graph_then_runs_once_approved(
    engine: Engine, graph: str
) -> None:
    out = await engine.runner.start(graph, {"message": "refund 1005 25"}, principal="alice")
    assert out.status == "waiting", out
    [review] = await _pending(engine, out.run_id)
    assert review.tool == "@input"
    assert review.shown["content"] == "refund 1005 25"
    assert review.id in out.pending
    # The graph has not run: the thread holds nothing of the message yet.
    assert await _messages(engine, graph, out.thread_id) == []
    # Nor does another message overtake it on the thread.
    with pytest.raises(ThreadBusy):
        await engine.runner.start(
            graph, {"message": "refund 1006 5"}, principal="alice", thread_id=out.thread_id
        )

    await engine.decide_as_operator(review.id, "approve", principal="bob")
    assert await engine.worker.drain() == 1
    # Now the agent runs, and its refund waits for its own approval.
    [refund] = await _pending(engine, out.run_id)
    assert refund.call_id == "refund-1005"
    await engine.decide_as_operator(refund.id, "approve", principal="bob")
    assert await engine.worker.drain() == 1
    run = await engine.runs.get(out.run_id)
    assert run is not None
    assert run.status == "completed", run
    assert run.answer == "success: refunded 25.00 on 1005"
    assert len(await side_effects(engine, out.run_id, "refund-1005")) == 1
    # input was emitted for the message once with an outcome (the held attempt is withdrawn).
    kinds = await scalar(
        engine,
        "select array_agg(point order by sequence) from interception_records"
        " where run_id = %s and point = 'input'",
        out.run_id,
    )
    assert kinds == ["input"]


@pytest.mark.parametrize("graph", HELD)
async def test_a_rejected_held_input_ends_the_run_blocked_and_is_kept_nowhere(
    engine: Engine, graph: str
) -> None:
    out = await engine.runner.start(graph, {"message": "refund 1005 25"}, principal="alice")
    [review] = await _pending(engine, out.run_id)
    await engine.decide_as_operator(review.id, "reject", principal="bob", reason="not this order")
    assert await engine.worker.drain() == 1
    run = await engine.runs.get(out.run_id)
    assert run is not None
    assert run.status == "blocked", run
    assert run.error is not None
    assert "not this order" in run.error
    assert await _messages(engine, graph, out.thread_id) == []
    assert await side_effects(engine, out.run_id, "refund-1005") == []
    # The thread takes new input again.
    again = await engine.runner.start(
        graph, {"message": "refund 1001 5"}, principal="alice", thread_id=out.thread_id
    )
    assert again.status == "waiting", again


async def test_a_cancelled_held_run_never_starts_its_graph(engine: Engine) -> None:
    graph = "nested_escalate_input"
    out = await engine.runner.start(graph, {"message": "refund 1005 25"}, principal="alice")
    [review] = await _pending(engine, out.run_id)
    await engine.decide_as_operator(review.id, "approve", principal="bob")
    # Cancelled after the decision, before the worker took its job.
    await scalar(
        engine,
        "update runs set status = 'cancelled', error = 'test' where id = %s returning id",
        out.run_id,
    )
    await engine.worker.drain()
    assert await _messages(engine, graph, out.thread_id) == []
    assert await side_effects(engine, out.run_id, "refund-1005") == []
