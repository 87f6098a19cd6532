"""The CLI met by what an operator's shell can hand it: a closed stdin, a password that is no
text, a reader that stops early, a malformed webhook or database URL. Each is one line and a
documented exit code, never a traceback; nothing is half-written, and no credential is echoed."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess

import pytest

from tests.integration.helpers import scalar
from tests.integration.inprocess import invoke
from tests.integration.processes import APPROVALS, Result
from web.engine import Engine


async def _real(
    env: dict[str, str], stdin: bytes | None, *args: str, close_stdin: bool = False
) -> Result:
    proc = await asyncio.create_subprocess_exec(
        APPROVALS,
        *args,
        env=env,
        stdin=subprocess.DEVNULL if close_stdin else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # A closed descriptor 0, as `<&-` leaves it: Python then has no sys.stdin at all.
        preexec_fn=(lambda: os.close(0)) if close_stdin else None,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), 120)
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err.decode())


@pytest.mark.slow
async def test_a_password_that_is_no_text_or_no_stdin_is_exit_2_and_adds_nobody(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    add = ("users", "add", "alice", "--group", "support", "--password-stdin")
    nul = await invoke(cli_env, *add, stdin="pass\x00word12345\n")
    assert (nul.code, nul.stderr) == (2, "error: a password contains a NUL character (U+0000)\n")
    not_utf8 = await _real(cli_env, b"pass\xed\xa0\x80word12345\n", *add)
    assert not_utf8.code == 2, not_utf8.stderr
    assert len(not_utf8.stderr.splitlines()) == 1
    closed = await _real(cli_env, None, *add, close_stdin=True)
    assert closed.code == 2, closed.stderr
    assert closed.stderr == (
        "error: --password-stdin: standard input is closed; give the password on it\n"
    )
    assert await scalar(engine, "select count(*) from users") == 0


@pytest.mark.slow
async def test_an_export_whose_reader_stops_early_ends_quietly(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    # Each exported line carries two 64-digit hashes: 2,000 lines are several times a 64 KiB
    # pipe's buffer, so the exporter is still writing when its reader goes.
    async with engine.connection() as conn:
        await conn.execute(
            "insert into audit_events (kind, data)"
            " select 'x.test', jsonb_build_object('i', g) from generate_series(1, 2000) g"
        )
    # As a shell runs it: the reader reads a line and goes; the exporter's status and stderr.
    script = f'"{APPROVALS}" audit export 2>&3 | head -1 >/dev/null; echo "${{PIPESTATUS[0]}}"'
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        f"{{ {script} ; }} 3>&2",
        env={**cli_env, "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert out.decode().strip() == str(128 + signal.SIGPIPE), err
    assert err == b""


async def test_a_malformed_webhook_url_is_exit_2_before_anything_is_anchored(
    cli_env: dict[str, str], tmp_path: os.PathLike[str]
) -> None:
    to = os.path.join(tmp_path, "anchors.jsonl")
    bad = await invoke(cli_env, "audit", "anchor", "--to", to, "--webhook", "http://[::1")
    assert bad.code == 2, bad.stderr
    assert bad.stderr == "error: --webhook is not an http(s) URL: 'http://[::1'\n"
    assert not os.path.exists(to)


async def test_a_malformed_database_url_never_echoes_its_password(
    cli_env: dict[str, str],
) -> None:
    env = {**cli_env, "APPROVALS_DATABASE_URL": "postgresql://u:Sup3rSecret pw@127.0.0.1/db"}
    refused = await invoke(env, "audit", "verify")
    assert refused.code == 1
    assert len(refused.stderr.splitlines()) == 1
    assert "Sup3rSecret" not in refused.stderr
