"""The ``approvals`` command run in this process (typer's CliRunner on a thread), for contract
checks that need no process of their own: milliseconds instead of a second per call."""

from __future__ import annotations

import asyncio
import logging
import os

from typer.testing import CliRunner

from tests.integration.processes import Result
from web.cli import app


async def invoke(env: dict[str, str], *args: str, stdin: str | None = None) -> Result:
    """Run ``approvals ARGS`` with exactly ``env``'s APPROVALS_* settings (others unset) and
    ``stdin`` on its standard input. On a thread: the command runs its own event loop."""
    return await asyncio.to_thread(run, env, *args, stdin=stdin)


def run(env: dict[str, str], *args: str, stdin: str | None = None) -> Result:
    """``invoke`` for a test that is not a coroutine (no event loop of its own running)."""
    settings: dict[str, str | None] = {k: None for k in os.environ if k.startswith("APPROVALS_")}
    settings.update({k: v for k, v in env.items() if k.startswith("APPROVALS_")})
    # A command configures logging as a process of its own would: one handler on its stderr
    # (the runner's, closed once it returns). Put pytest's handlers back afterwards, or later
    # records go to a closed stream and pytest's capture loses them.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        result = CliRunner().invoke(
            app, list(args), input=stdin, env=settings, catch_exceptions=False
        )
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
    return Result(result.exit_code, result.stdout, result.stderr)
