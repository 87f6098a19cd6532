"""Admission of a start: a bounded wait for a place among the runs a process starts at once.

A start holds a pool connection (its thread's lock) for its whole first step, and its step
takes others (checkpoints, requests): a process starts at most (APPROVALS_POOL_MAX_SIZE - 2) / 2
runs at once (docs/deployment.md, "Pool sizing"). A start beyond that waits for a place, at most
``APPROVALS_START_WAIT_SECONDS``; past it, it is refused with ``StartsBusy`` (a 503 with
Retry-After) before anything of it is written: no run row, no checkpoint, no request.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from approvals.errors import StartsBusy


@asynccontextmanager
async def start_place(places: asyncio.Semaphore, seconds: float) -> AsyncIterator[None]:
    """A place in ``places`` for the block, waited for at most ``seconds``; ``StartsBusy``
    past that."""
    try:
        async with asyncio.timeout(seconds):
            await places.acquire()
    except TimeoutError:
        # A step takes about as long as a start waited: a place is likely free by then.
        raise StartsBusy(seconds, max(1, math.ceil(seconds))) from None
    try:
        yield
    finally:
        places.release()
