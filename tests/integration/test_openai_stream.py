"""An OpenAI-SDK run's events: ``approvals runs start --stream`` prints each tool call as the
SDK makes it (the step runs with ``Runner.run_streamed``), then the status; the same events are
the run's stream (``engine.run_events``, which ``GET /api/v1/runs/{id}/events`` serves), up to
the pause and again after the resume, with the final answer as ``output`` released it."""

from __future__ import annotations

import json

import pytest

from tests.integration.inprocess import invoke
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def updates_of(engine: Engine, run_id: str) -> list[dict[str, object]]:
    return [
        {"kind": "update", "node": e["node"], **e["data"]}
        for e in await engine.run_events.after(run_id, 0)
        if e["kind"] == "update"
    ]


def calls_in(updates: list[dict[str, object]]) -> list[str]:
    return [
        str(c)
        for u in updates
        for m in u["messages"]  # type: ignore[attr-defined]
        for c in m["tool_calls"]
    ]


async def test_runs_start_stream_prints_the_sdk_runs_tool_calls_up_to_the_pause(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    started = await invoke(
        cli_env,
        "runs",
        "start",
        "refund_openai",
        "--input",
        '{"message": "refund 1001"}',
        "--as",
        "cli:alice",
        "--stream",
        "--json",
    )
    assert started.code == 0, started.stderr
    *updates, status = [json.loads(line) for line in started.stdout.splitlines()]
    assert status["kind"] == "status"
    assert status["status"] == "waiting"
    assert calls_in(updates) == ["lookup_order", "issue_refund"]
    assert {u["node"] for u in updates} == {"refund_openai"}
    # The same events, in the same order, as the run's stream.
    assert updates == await updates_of(engine, status["run_id"])
    # Never a call's arguments.
    assert "1001" not in json.dumps(updates)


async def test_the_resumed_step_adds_the_released_answer_to_the_runs_stream(
    engine: Engine,
) -> None:
    run = await engine.runner.start("refund_openai", {"message": "refund 1001"}, principal="alice")
    before = await updates_of(engine, run.run_id)
    # Not followed as it ran: the same events, taken from the step's items.
    assert calls_in(before) == ["lookup_order", "issue_refund"]
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    await engine.drain()
    after = await updates_of(engine, run.run_id)
    assert after[: len(before)] == before
    new = after[len(before) :]
    assert len(new) == 1, new
    [answer] = new
    assert answer["messages"] == [{"content": "Refunded 25.00 on order 1001.", "tool_calls": []}]
