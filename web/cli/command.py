"""What every ``approvals`` command is made of: exit codes, output, opening the engine.

JSON goes to stdout where a command promises it; errors are one line on stderr. Exit codes:
0 success, 1 failure (database unreachable, run failed), 2 invalid input, 3 conflict (request no
longer pending, thread still waiting, run already ended), 4 not found.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import os
import signal
import sys
import traceback
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar
from urllib.parse import urlsplit

import typer

try:
    import uvloop
except ImportError:  # not on Windows: asyncio's own loop (run_loop)
    uvloop = None  # type: ignore[assignment]

from approvals import json_values
from approvals.errors import ApprovalsError, Category, InvalidValue
from approvals.principals import console_name

if TYPE_CHECKING:
    from web.engine import Engine
    from web.settings import Settings

T = TypeVar("T")

EXIT_FAILURE, EXIT_INVALID, EXIT_NOT_PENDING, EXIT_NOT_FOUND = 1, 2, 3, 4


#: The exit code of each category of error: the one place it is decided (forbidden,
#: unavailable and failure share 1, failure).
_EXIT: dict[Category, int] = {
    Category.INVALID: EXIT_INVALID,
    Category.CONFLICT: EXIT_NOT_PENDING,
    Category.NOT_FOUND: EXIT_NOT_FOUND,
}


def _exit_code(exc: ApprovalsError) -> int:
    return _EXIT.get(exc.category, EXIT_FAILURE)


def fail(message: str, code: int) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def emit_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, sort_keys=True, default=str))


def emit_listing(
    items: list[dict[str, Any]],
    *,
    as_json: bool,
    empty: str,
    line: Callable[[dict[str, Any]], str],
) -> None:
    """A list command's output: the items as JSON, or else one line each (``empty`` when
    there are none)."""
    if as_json:
        emit_json(items)
        return
    if not items:
        typer.echo(empty)
    for item in items:
        typer.echo(line(item))


def parse_json(option: str, text: str) -> Any:
    """A JSON option, parsed by the engine's rules (no NaN, no NUL, no deep nesting): exit 2
    naming the option otherwise."""
    try:
        return json_values.parse_json(option, text)
    except InvalidValue as exc:
        fail(str(exc), EXIT_INVALID)


def default_principal() -> str:
    """Who acts when ``--as`` is not given: the OS user, as a principal that is no person
    (``cli:USER``), held to what ``--as cli:USER`` accepts; ``InvalidValue`` (exit 2) asking
    for ``--as`` when there is no such user or the name is not one."""
    try:
        # LOGNAME and USER come from the environment: a newline in them would write a second,
        # forged principal on the audit line of who started a run or overrode a decision.
        user = getpass.getuser()
        return console_name(f"cli:{user}").principal
    except (KeyError, OSError) as exc:
        raise InvalidValue(
            "principal", "the OS user has no name here: say who acts with --as"
        ) from exc
    except InvalidValue as exc:
        raise InvalidValue(
            "principal",
            f"the OS user {user[:64]!r} is no principal name (printable, no spaces): "
            "say who acts with --as",
        ) from exc


async def acting(engine: Engine, given: str | None) -> str:
    """Who ``--as`` names (``Engine.console_principal``: ``NAME`` is the local account ``NAME``,
    ``KIND:NAME`` any other principal), or ``default_principal()`` when it is not given."""
    return default_principal() if given is None else await engine.console_principal(given)


def load_settings() -> Settings:
    """The settings from the environment and the config file (``web.settings.load_settings``)."""
    # Imported here, not at the top: pydantic-settings and pydantic take about 0.1 s to import,
    # and ``--help`` and the policy commands need no settings.
    from web import settings

    return settings.load_settings()


def database_url(settings: Settings) -> tuple[str, bool]:
    """The configured server, or the embedded one (started on demand). ``(url, embedded)``."""
    # Imported here, not at the top (see load_settings); the settings given are of it already.
    from web.settings import revealed

    url = revealed(settings.database_url)
    if url:
        return url, False
    # Imported here, not at the top: the engine (psycopg, the repositories, the notifier and
    # its httpx) takes about 0.5 s to import, and only the commands that open it need it.
    from web.engine import start_embedded

    return start_embedded(settings.data_dir / "pg"), True


def migration_url(settings: Settings, url: str) -> str:
    """Where migrations run: the tables' owner (``APPROVALS_MIGRATION_DATABASE_URL``) when set,
    else ``url``, the database the engine uses."""
    # Imported here, not at the top (see load_settings); the settings given are of it already.
    from web.settings import revealed

    return revealed(settings.migration_database_url) or url


async def upgrade_schema(url: str, *, runtime_role: str | None) -> None:
    """Apply the migrations at ``url`` (``web.engine.upgrade``, which imports Alembic only
    then)."""
    # Imported here, not at the top: the engine takes about 0.5 s to import (see database_url).
    from web.engine import upgrade

    await upgrade(url, runtime_role=runtime_role)


def run_async(
    fn: Callable[[Engine], Awaitable[T]],
    *,
    migrate: bool = False,
    settings_update: dict[str, Any] | None = None,
) -> T:
    """Open the engine for one command and map engine errors to exit codes."""

    async def main() -> T:
        # Imported here, not at the top: the engine takes about 0.5 s to import (see
        # database_url), and neither ``--help`` nor the policy commands open it.
        from web.engine import open_engine
        from web.settings import check_pool_size

        settings = load_settings()
        if settings_update:
            settings = settings.model_copy(update=settings_update)
            check_pool_size(settings.pool_max_size, settings.worker_concurrency)
        url, embedded = database_url(settings)
        if migrate or embedded:
            await upgrade_schema(migration_url(settings, url), runtime_role=settings.runtime_role)
        async with open_engine(url, settings) as engine:
            return await fn(engine)

    return guarded(lambda: run_loop(main()))


def run_loop(main: Coroutine[Any, Any, T]) -> T:
    """Run a command's ``main`` on a new event loop: uvloop's where it is installed (a
    dependency on Linux and macOS; the servers and workers spend less CPU per request and per
    statement on it), the standard library's otherwise."""
    if uvloop is None:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


def guarded(call: Callable[[], T]) -> T:
    """Engine errors become their exit code; anything unexpected one line and exit 1 (with the
    traceback when APPROVALS_DEBUG=1)."""
    try:
        return call()
    except ApprovalsError as exc:
        if os.environ.get("APPROVALS_DEBUG") == "1":
            traceback.print_exc()
        fail(str(exc), _exit_code(exc))
    except BrokenPipeError:
        # The reader went away (``| head -1``): end quietly, as a process SIGPIPE stops does,
        # with nothing more written to the closed pipe.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(128 + signal.SIGPIPE) from None
    except Exception as exc:
        if os.environ.get("APPROVALS_DEBUG") == "1":
            raise
        first = _without_database_password(str(exc).splitlines()[0] if str(exc) else "")
        fail(f"unexpected {type(exc).__name__}: {first} (APPROVALS_DEBUG=1 shows more)", 1)


def _without_database_password(message: str) -> str:
    """``message`` with APPROVALS_DATABASE_URL's password starred out: a driver's complaint
    about a malformed URL quotes the part it choked on, and stderr goes to logs."""
    url = os.environ.get("APPROVALS_DATABASE_URL") or ""
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    return message.replace(password, "***") if password else message
