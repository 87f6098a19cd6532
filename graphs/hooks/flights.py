"""Reads and writes that outlive the timeout of the one who asked for them.

The emitter bounds an approval slot's answer with the interceptor timeout (AGENT-HOOKS-0.1 §9)
and cancels the slot past it. When the slot was only waiting for a pool connection, the
database was busy, not wrong, and ``Session.emit`` asks the slot again
(``graphs.hooks.governance``). A new read would wait at the back of the pool's queue again and
time out again, for as long as the queue stays deeper than the timeout; ``Flights`` keeps the
first one running (shielded from the cancellation), so that the slot's next attempt awaits the
same task, which kept its place.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any


class Flights:
    """Named tasks in flight, each for one key (the call it reads or writes for)."""

    __slots__ = ("_tasks",)

    def __init__(self) -> None:
        self._tasks: dict[str, tuple[Hashable, asyncio.Future[Any]]] = {}

    async def run(self, name: str, key: Hashable, make: Callable[[], Awaitable[Any]]) -> Any:
        """``make()``'s result, run as a task a cancellation of this call does not cancel.
        Asked again for the same ``name`` and ``key`` before the task was awaited to its end,
        the same task is awaited; a task that failed is not reused."""
        found = self._tasks.get(name)
        if found is None or found[0] != key or _failed(found[1]):
            task = asyncio.ensure_future(make())
            # Retrieved, so that a task nobody awaits any more logs no "never retrieved".
            task.add_done_callback(_retrieve)
            found = self._tasks[name] = (key, task)
        result = await asyncio.shield(found[1])
        del self._tasks[name]
        return result

    def cancel(self) -> None:
        """Cancel what is still in flight: its asker gave up (or was itself cancelled), and
        nobody will await it again."""
        for _, task in self._tasks.values():
            task.cancel()
        self._tasks.clear()


def _failed(task: asyncio.Future[Any]) -> bool:
    return task.done() and (task.cancelled() or task.exception() is not None)


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
