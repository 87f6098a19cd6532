"""The ``Runs`` port: a run is created under its thread's lock, which one step holds at a time,
and its settlement is written as the lock is released."""

from __future__ import annotations

import asyncio

import pytest

from approvals.errors import ThreadBusy
from approvals.model import RunStatus
from approvals.ports import NewRun, Settlement
from tests.contracts.backends import Adapters
from tests.contracts.records import new_run
from tests.waiting import eventually


def _new_run(thread_id: str = "thread-1") -> NewRun:
    return new_run(thread_id=thread_id)


async def test_a_run_is_running_during_its_step_and_settled_after(adapters: Adapters) -> None:
    new = _new_run()

    async with adapters.runs.begin(new) as lease:
        during = await adapters.runs.get(new.run_id)
        lease.settle(Settlement(run_id=new.run_id, status=RunStatus.COMPLETED, answer="done"))

    after = await adapters.runs.get(new.run_id)
    assert during is not None
    assert (during.status, during.graph, during.started_by) == (
        RunStatus.RUNNING,
        "refund",
        "local:alice",
    )
    assert during.input == {"message": "refund 1001"}
    assert after is not None
    assert (after.status, after.answer, after.error) == (RunStatus.COMPLETED, "done", None)


async def test_one_step_at_a_time_holds_a_thread(adapters: Adapters) -> None:
    first, second = _new_run(), _new_run()
    entered = asyncio.Event()
    release = asyncio.Event()

    async def hold() -> None:
        async with adapters.runs.begin(first):
            entered.set()
            await release.wait()

    holder = asyncio.create_task(hold())
    await entered.wait()
    waiter = asyncio.create_task(_enter(adapters, second))
    await eventually(lambda: adapters.thread_waiters("thread-1"), what="a step waiting")
    assert not waiter.done()
    assert await adapters.runs.get(second.run_id) is None

    release.set()
    await holder
    await asyncio.wait_for(waiter, 10)
    assert await adapters.runs.get(second.run_id) is not None


async def _enter(adapters: Adapters, new: NewRun) -> None:
    async with adapters.runs.begin(new):
        pass


async def test_a_refusing_check_creates_no_run_and_frees_the_thread(adapters: Adapters) -> None:
    refused = _new_run()

    async def busy() -> None:
        raise ThreadBusy(refused.thread_id)

    with pytest.raises(ThreadBusy):
        async with adapters.runs.begin(refused, check=busy):
            pytest.fail("the step ran after its check refused it")

    assert await adapters.runs.get(refused.run_id) is None
    await asyncio.wait_for(_enter(adapters, _new_run()), 10)


async def test_a_step_that_raises_frees_the_thread_and_settles_nothing(adapters: Adapters) -> None:
    crashed = _new_run()

    with pytest.raises(RuntimeError):
        await _crash(adapters, crashed)

    run = await adapters.runs.get(crashed.run_id)
    assert run is not None
    assert run.status is RunStatus.RUNNING
    await asyncio.wait_for(_enter(adapters, _new_run()), 10)


async def _crash(adapters: Adapters, new: NewRun) -> None:
    async with adapters.runs.begin(new) as lease:
        lease.settle(Settlement(run_id=new.run_id, status=RunStatus.COMPLETED))
        raise RuntimeError("the step crashed")


async def test_the_latest_run_on_a_thread_is_the_newest(adapters: Adapters) -> None:
    older, newer = _new_run(), _new_run()
    await _enter(adapters, older)
    await _enter(adapters, newer)

    latest = await adapters.runs.latest_on_thread("thread-1")

    assert latest is not None
    assert latest.id == newer.run_id
    assert await adapters.runs.latest_on_thread("thread-none") is None
