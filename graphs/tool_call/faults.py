"""Named pauses in a call's life, so fault tests can kill a process at exactly that point.

Off unless ``APPROVALS_FAULT_PAUSE_<POINT>`` is set to a number of seconds; reading it costs a
dictionary lookup. Points: ``AFTER_TOOL`` (the tool ran and the ledger recorded its result, the
step's checkpoint is not written yet).
"""

from __future__ import annotations

import asyncio
import os


async def pause_at(point: str) -> None:
    seconds = os.environ.get(f"APPROVALS_FAULT_PAUSE_{point}")
    if seconds:
        await asyncio.sleep(float(seconds))
