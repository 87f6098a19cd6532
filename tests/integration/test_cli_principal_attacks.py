"""Hostile ``--as`` text at the operator console: each is one line and exit 2, never a
traceback, and never a second name for an account that exists (issue 30, item 6)."""

from __future__ import annotations

import pytest

from tests.integration.helpers import scalar
from tests.integration.inprocess import invoke
from web.engine import Engine

pytestmark = pytest.mark.slow

PASSWORD = "correct horse battery staple"
REFUND = '{"message": "refund 1001"}'
HOSTILE = {
    "upper-case": "Bob",
    "upper-case-spelled": "local:Bob",
    "upper-case-kind": "LOCAL:bob",
    "space-after-colon": "local: bob",
    "space-before": " bob",
    "trailing-space": "bob ",
    "tab": "local:\tbob",
    "nbsp": "bob\u00a0",
    "cyrillic-o": "b\u043eb",
    "fullwidth": "\uff42\uff4f\uff42",
    "zero-width": "bo\u200bb",
    "combining": "bo\u0301b",
    "nul": "bob\x00",
    "lone-surrogate": "bob\udcff",
    "surrogate-spelled": "cli:\udcff",
    "newline": "bob\nlocal:carol",
    "empty": "",
    "colon-only": ":",
    "empty-name": "local:",
    "very-long": "b" * 100_000,
    "very-long-spelled": "cli:" + "b" * 100_000,
    "very-long-kind": "k" * 40 + ":bob",
    "token": "token:bob",
    "double-colon": "local:local:bob",
    "oidc-nul": "oidc:iss#\x00",
}


@pytest.mark.parametrize("name", HOSTILE)
async def test_hostile_as_text_is_one_line_and_exit_2(
    engine: Engine, cli_env: dict[str, str], name: str
) -> None:
    await engine.accounts.add_user("bob", PASSWORD, ["support"])
    started = await invoke(
        cli_env, "runs", "start", "refund", "--input", REFUND, "--as", HOSTILE[name]
    )
    assert started.code == 2, (started.code, started.stdout, started.stderr[-2000:])
    assert started.stderr.count("\n") == 1, started.stderr[-2000:]
    assert len(started.stderr) < 1000
    assert await scalar(engine, "SELECT count(*) FROM runs") == 0


@pytest.mark.parametrize("login", ["bob\nlocal:carol", "bob smith", "bob\udcff", "bob\x1b[2K"])
async def test_an_os_user_that_as_would_refuse_is_refused_without_as(
    engine: Engine, cli_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, login: str
) -> None:
    """Without ``--as`` the OS user acts as ``cli:USER``: a login name that ``--as cli:USER``
    refuses (a newline forging a second principal on the audit line, a space, an escape) must be
    refused there too, not stored as who started the run or overrode a decision."""
    for variable in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.setenv(variable, login)
    started = await invoke(cli_env, "runs", "start", "refund", "--input", REFUND)
    assert started.code == 2, (started.code, started.stderr[-2000:])
    assert started.stderr.count("\n") == 1, started.stderr[-2000:]
    assert "--as" in started.stderr
    assert await scalar(engine, "SELECT count(*) FROM runs") == 0
