"""Run events as the runner publishes them: a message is sent only as the output check
released it (buffered output: the model's raw answer is never streamed), whether the host is
build_agent (its model tagged nostream) or create_agent with ApprovalMiddleware."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from graphs.run.step_events import StepEvents
from storage.run_events import RunEventHub
from tests.integration.helpers import scalar, until
from tests.waiting import eventually
from web.engine import Engine, open_engine
from web.settings import Settings

GRAPHS = {
    "mask_output": "tests.integration.governed_graphs:mask_output",
    "deny_output": "tests.integration.governed_graphs:deny_output",
    "mw_mask_output": "tests.integration.middleware_graphs:mask_output",
}


@pytest.fixture
async def hosts(database_url: str, tmp_path: Path) -> AsyncIterator[Engine]:
    settings = Settings(
        database_url=database_url, config_file=tmp_path / "none.toml", graphs=GRAPHS
    )
    async with open_engine(database_url, settings) as engine:
        yield engine


async def run_to_the_end(engine: Engine, graph: str, message: str) -> tuple[Any, list[Any]]:
    """Start a run (approving whatever it waits on); the node updates the starter was given."""
    seen: list[Any] = []

    async def observe(node: str, data: dict[str, Any]) -> None:
        seen.append({"node": node, **data})

    out = await engine.runner.start(graph, {"message": message}, principal="a", observe=observe)
    for _ in range(5):
        run = await engine.runs.get(out.run_id)
        assert run is not None
        if run.status != "waiting":
            return run, seen
        for request in await engine.requests.for_run(out.run_id):
            if request.status == "pending":
                await engine.decide_as_operator(request.id, "approve", principal="bob")
        await engine.worker.drain()
    raise AssertionError("the run kept waiting")


def answers(events: list[Any]) -> list[str]:
    return [m["content"] for e in events for m in e.get("messages", []) if m["content"]]


@pytest.mark.parametrize(
    ("graph", "message", "released"),
    [
        ("mask_output", "refund 1001", "Refunded #.## on order 1001."),
        ("mw_mask_output", "refund 1001 25", "success: refunded #.## on 1001"),
    ],
)
async def test_a_streamed_answer_is_only_ever_the_one_the_output_check_released(
    hosts: Engine, graph: str, message: str, released: str
) -> None:
    run, seen = await run_to_the_end(hosts, graph, message)
    assert run.status == "completed"
    assert run.answer == released
    recorded = await hosts.run_events.after(run.id, 0)
    updates = [{"node": e["node"], **e["data"]} for e in recorded if e["kind"] == "update"]
    assert answers(updates)[-1] == released
    # Nothing of the model's own answer (the amount) was ever sent, live or recorded.
    assert "25.00" not in json.dumps(seen)
    assert "25.00" not in json.dumps([e["data"] for e in recorded])
    # The starter was given the first step's updates as they were recorded.
    assert seen == updates[: len(seen)]
    assert seen


async def test_a_denied_answer_is_never_streamed(hosts: Engine) -> None:
    run, seen = await run_to_the_end(hosts, "deny_output", "refund 1001")
    assert run.status == "blocked"
    recorded = await hosts.run_events.after(run.id, 0)
    text = json.dumps(seen) + json.dumps([e["data"] for e in recorded])
    assert "Refunded" not in text
    assert [e["data"]["status"] for e in recorded if e["kind"] == "status"] == [
        "running",
        "blocked",
    ]


async def test_a_stream_is_woken_by_its_runs_events_only_and_outlives_a_lost_connection(
    hosts: Engine,
) -> None:
    mine = await hosts.runner.start("mask_output", {"message": "refund 1001"}, principal="a")
    other = await hosts.runner.start("mask_output", {"message": "refund 1002"}, principal="a")
    hub = RunEventHub(hosts.url, retry_seconds=0.05)
    try:
        sub = await hub.subscribe(mine.run_id)
        events = hosts.run_events
        await events.publish(other.run_id, "elsewhere", {"messages": []})
        assert not await sub.wait(0.3)
        await events.publish(mine.run_id, "here", {"messages": []})
        assert await sub.wait(10)

        # The listening connection dies: the stream is woken (to re-read), and the hub listens
        # again, so later events still wake it.
        killed = await scalar(
            hosts,
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE query LIKE 'LISTEN approvals_run_events%%' AND datname = current_database()",
        )
        assert killed == 1
        assert await sub.wait(10)
        await until(
            hosts,
            "SELECT count(*) > 0 FROM pg_stat_activity WHERE datname = current_database()"
            " AND query LIKE 'LISTEN approvals_run_events%%'",
        )
        await events.publish(mine.run_id, "again", {"messages": []})
        assert await sub.wait(10)
        sub.close()
    finally:
        await hub.close()


def shape(events: list[Any]) -> list[str]:
    """The kinds of a run's events, a status as its value, a run of updates as one."""
    out: list[str] = []
    for e in events:
        kind = e["data"]["status"] if e["kind"] == "status" else e["kind"]
        if not (kind == "update" and out and out[-1] == "update"):
            out.append(kind)
    return out


async def test_each_steps_updates_are_recorded_in_order_before_the_status_it_ends_with(
    hosts: Engine,
) -> None:
    run, seen = await run_to_the_end(hosts, "refund", "refund 1001")
    recorded = await hosts.run_events.after(run.id, 0)
    # Written by each step's settlement (or on the way), never after its status: a stream,
    # which stops at "waiting", has sent the step's updates by then.
    assert shape(recorded) == ["running", "update", "waiting", "resuming", "update", "completed"]
    first = [e for e in recorded if e["kind"] == "update"][: len(seen)]
    assert [{"node": e["node"], **e["data"]} for e in first] == seen


async def test_a_long_steps_updates_are_written_on_the_way_and_the_rest_by_its_settlement(
    hosts: Engine,
) -> None:
    run = await hosts.runner.start("mask_output", {"message": "refund 1001"}, principal="a")
    before = len(await hosts.run_events.after(run.run_id, 0))
    updates = StepEvents(run.run_id, hosts.run_events.publish, flush_after=0.05)
    updates.add("agent", {"messages": [{"content": "thinking", "tool_calls": []}]})
    updates.add("tools", {"messages": []})

    async def both_written() -> list[Any]:
        written = (await hosts.run_events.after(run.run_id, 0))[before:]
        return written if len(written) == 2 else []

    written = await eventually(both_written, what="the step's two updates, written on the way")
    # A stream of the step saw them while it ran, in order.
    assert [e["node"] for e in written] == ["agent", "tools"]
    updates.add("agent", {"messages": [{"content": "done", "tool_calls": []}]})
    # The step ends: what was not written yet goes to its settlement, once.
    assert await updates.take() == (
        ("agent", {"messages": [{"content": "done", "tool_calls": []}]}),
    )
    updates.add("late", {"messages": []})
    # Time is the point: nothing is written in four times the flush delay (50 ms) either.
    await asyncio.sleep(0.2)
    assert len(await hosts.run_events.after(run.run_id, 0)) == before + 2
