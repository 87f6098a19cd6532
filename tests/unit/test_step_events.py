"""A step's node updates kept for its settlement (graphs.run.step_events): none is lost, written
twice or out of order, whether the step ends first or a write on the way fails."""

from __future__ import annotations

import asyncio
from typing import Any

from graphs.run.step_events import StepEvents
from tests.waiting import eventually


class Sink:
    """Where the updates go (PostgreSQL's run_events in the engine): what it was given, and
    whether it refuses the next write."""

    def __init__(self) -> None:
        self.written: list[tuple[str, str]] = []
        self.refuse = 0
        self.wrote = asyncio.Event()

    async def __call__(self, run_id: str, node: str, data: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        if self.refuse:
            self.refuse -= 1
            raise OSError("connection refused")
        self.written.append((run_id, node))
        self.wrote.set()


async def test_a_step_that_ends_in_time_leaves_every_update_to_its_settlement() -> None:
    sink = Sink()
    updates = StepEvents("run-1", sink, flush_after=60)
    updates.add("agent", {"n": 1})
    updates.add("tools", {"n": 2})

    assert await updates.take() == (("agent", {"n": 1}), ("tools", {"n": 2}))
    assert sink.written == []


async def test_a_long_step_writes_its_updates_in_order_and_leaves_only_the_rest() -> None:
    sink = Sink()
    updates = StepEvents("run-1", sink, flush_after=0.01)
    updates.add("agent", {})
    updates.add("tools", {})
    await eventually(lambda: len(sink.written) == 2, what="both updates written on the way")
    updates.add("agent", {"last": True})

    assert await updates.take() == (("agent", {"last": True}),)
    assert sink.written == [("run-1", "agent"), ("run-1", "tools")]


async def test_an_update_a_write_on_the_way_failed_is_left_to_the_settlement_once() -> None:
    sink = Sink()
    sink.refuse = 1
    updates = StepEvents("run-1", sink, flush_after=0.01)
    updates.add("agent", {})
    updates.add("tools", {})
    await eventually(lambda: sink.refuse == 0, what="the write on the way, refused")

    assert await updates.take() == (("agent", {}), ("tools", {}))
    assert sink.written == []


async def test_after_the_step_ended_nothing_more_is_written_from_there() -> None:
    sink = Sink()
    updates = StepEvents("run-1", sink, flush_after=0.01)
    await updates.take()
    updates.add("late", {})
    # Time is the point: nothing is written in five times the flush delay either.
    await asyncio.sleep(0.05)

    assert sink.written == []


async def test_a_step_that_raised_writes_what_it_kept() -> None:
    sink = Sink()
    updates = StepEvents("run-1", sink, flush_after=60)
    updates.add("agent", {})
    updates.add("tools", {})

    await updates.abandon()

    assert sink.written == [("run-1", "agent"), ("run-1", "tools")]
