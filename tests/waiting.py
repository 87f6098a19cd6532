"""Waiting for what a test expects to happen, never for a fixed time.

A test that needs something to have happened (a row written, a status reached, a stream's
event, a backend waiting for a lock, a process's line of output) asks for it again until it
holds: it goes on as soon as it does, however fast or loaded the machine, and fails naming
what never came. The timeout is generous on purpose: it is what a failing test costs, not what
a passing one waits.

A test whose point is time itself (a deadline that must pass, a window in which something must
NOT happen) may still sleep; each such sleep says why where it stands.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

T = TypeVar("T")

#: How long a condition may take before the test fails: far beyond what any of them needs on
#: a loaded two-core machine, so that only a real failure reaches it.
TIMEOUT = 30.0
#: The first pause between two checks, doubled each time up to ``LONGEST_PAUSE``: a condition
#: that holds at once costs next to nothing, and one that takes seconds is asked ten times a
#: second, not a hundred.
FIRST_PAUSE = 0.005
LONGEST_PAUSE = 0.1


def _failure(what: str, check: Callable[[], object], timeout: float, last: object) -> str:
    name = what or getattr(check, "__qualname__", repr(check))
    shown = repr(last)
    if len(shown) > 500:
        shown = shown[:500] + "..."
    return f"waited {timeout:g} s in vain for {name} (last seen: {shown})"


@overload
async def eventually(
    check: Callable[[], Awaitable[T | None]],
    *,
    timeout: float = TIMEOUT,
    what: str = "",
    interval: float = LONGEST_PAUSE,
) -> T: ...


@overload
async def eventually(
    check: Callable[[], T | None],
    *,
    timeout: float = TIMEOUT,
    what: str = "",
    interval: float = LONGEST_PAUSE,
) -> T: ...


async def eventually(
    check: Callable[[], object],
    *,
    timeout: float = TIMEOUT,
    what: str = "",
    interval: float = LONGEST_PAUSE,
) -> object:
    """``check()``'s first truthy value (``check`` may be a coroutine function), asked again
    until there is one; an ``AssertionError`` naming ``what`` after ``timeout`` seconds.
    ``interval``: the longest pause between two checks (a check that costs many queries)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    pause = min(FIRST_PAUSE, interval)
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() >= deadline:
            raise AssertionError(_failure(what, check, timeout, value))
        await asyncio.sleep(pause)
        pause = min(pause * 2, interval)


def eventually_sync(
    check: Callable[[], T | None],
    *,
    timeout: float = TIMEOUT,
    what: str = "",
    interval: float = LONGEST_PAUSE,
) -> T:
    """``eventually`` for code that runs no event loop (a sync test, a server's thread)."""
    deadline = time.monotonic() + timeout
    pause = min(FIRST_PAUSE, interval)
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(_failure(what, check, timeout, value))
        time.sleep(pause)
        pause = min(pause * 2, interval)


async def ready_tasks_ran(turns: int = 20) -> None:
    """Let every task of this loop that can run, run, without waiting on any clock: for a test
    that shows an in-process task is still blocked (on an ``asyncio.Event``, a lock) while it
    must be. It proves nothing about a task waiting on I/O or on a timer."""
    for _ in range(turns):
        await asyncio.sleep(0)
