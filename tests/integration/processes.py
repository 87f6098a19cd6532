"""Running the real ``approvals`` command in child processes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

APPROVALS = str(Path(sys.executable).parent / "approvals")


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


async def cli(env: dict[str, str], *args: str, timeout: float = 120) -> Result:
    proc = await asyncio.create_subprocess_exec(
        APPROVALS,
        *args,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err.decode())


async def spawn(env: dict[str, str], *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        APPROVALS, *args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
