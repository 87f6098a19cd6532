"""A step's node updates on their way to the run's events: written by the step's settlement.

Each node update of a step is a run event (``storage.run_events``: what a run's stream shows
while the step runs). Written with a statement each as the nodes finished, they cost an approval
cycle three round trips and their share of the client's CPU. Kept until the step ends, they are
written by the statement that settles it (``Settlement.events``), before the run's status event,
which is where a stream of the step stops. So that a stream of a long step (a model thinking for
seconds) stays live, what a step has kept for ``FLUSH_AFTER`` is written on the way, beside the
graph, oldest first; whatever that could not write is left to the settlement, which writes it or
fails the step.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("approvals.runner")

#: Records one node update of a run's step (``run_id, node, data``): where streams read it.
RunEventSink = Callable[[str, str, dict[str, Any]], Awaitable[None]]
#: Publishes one node update of a step as it happens: ``(node, data)`` (what ``approvals runs
#: start --stream`` is given, beside the run's event sink).
Publish = Callable[[str, dict[str, Any]], Awaitable[None]]
#: How long a node update may wait for its step's settlement before it is written on its own.
#: Most steps of an approval cycle end well within it; a model's turn seldom does.
FLUSH_AFTER = 0.25

StepUpdates = tuple[tuple[str, dict[str, Any]], ...]


class StepEvents:
    """The node updates of one step of a run, kept for its settlement."""

    def __init__(self, run_id: str, sink: RunEventSink, *, flush_after: float = FLUSH_AFTER):
        self._run_id = run_id
        self._sink = sink
        self._flush_after = flush_after
        self._pending: deque[tuple[str, dict[str, Any]]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._writing: asyncio.Task[None] | None = None
        self._taken = False

    def add(self, node: str, data: dict[str, Any]) -> None:
        """Keep one node update; it is written ``FLUSH_AFTER`` from now if the step has not
        ended by then."""
        self._pending.append((node, data))
        if self._timer is None and self._writing is None and not self._taken:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self._flush_after, self._write_soon)

    def _write_soon(self) -> None:
        self._timer = None
        if not self._taken:
            self._writing = asyncio.create_task(self._write(), name=f"run-events {self._run_id}")

    async def _write(self) -> None:
        """Write the kept updates in order, one at a time: an update is dropped from the kept
        ones only once written, so none is written twice or out of order."""
        try:
            while self._pending:
                node, data = self._pending[0]
                await self._sink(self._run_id, node, data)
                self._pending.popleft()
        except Exception as exc:
            # Still kept: the next write, or the settlement, has them.
            log.warning("run %s: node updates not written yet (%s)", self._run_id, exc)
        finally:
            self._writing = None

    async def take(self) -> StepUpdates:
        """The updates not written yet, in order, for the step's settlement: from now on
        nothing is written here (a write under way finishes first)."""
        self.stop()
        if self._writing is not None:
            await self._writing
        taken = tuple(self._pending)
        self._pending.clear()
        return taken

    async def abandon(self) -> None:
        """The step ended with no settlement (it raised): write what is kept, if the database
        lets us, so that updates of nodes that will not run again are not lost."""
        for node, data in await self.take():
            try:
                await self._sink(self._run_id, node, data)
            except Exception as exc:
                log.warning("run %s: node updates lost (%s)", self._run_id, exc)
                return

    def stop(self) -> None:
        """Write nothing more from here (a cancelled step)."""
        self._taken = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
