"""The CLI's commands (``approvals serve``, ``approvals worker``, the rest) run on uvloop where
it is installed, and on asyncio's own loop where it is not."""

from __future__ import annotations

import asyncio
import sys

import pytest

from web.cli import command


async def loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop is not a dependency on Windows")
def test_commands_run_on_uvloop() -> None:
    assert getattr(command, "uvloop", None) is not None
    assert command.run_loop(loop_module()).startswith("uvloop")


def test_without_uvloop_they_run_on_asyncios_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(command, "uvloop", None)
    assert command.run_loop(loop_module()).startswith("asyncio")


def test_what_main_returns_or_raises_is_the_commands() -> None:
    async def fails() -> None:
        raise LookupError("no such run")

    with pytest.raises(LookupError, match="no such run"):
        command.run_loop(fails())
