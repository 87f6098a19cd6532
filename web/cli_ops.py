"""``approvals runs cancel`` and ``approvals retention prune``: the operators' commands.

Exit codes follow the CLI's: 2 invalid input (a malformed run id, a bad age), 3 the run already
ended, 4 no such run.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

import typer

from approvals.errors import InvalidRunId
from storage.ops import PgOperations
from web.engine import Engine
from web.runs import valid_run_id

# web.cli registers these commands, so its helpers are imported when a command runs (as in
# web.cli_accounts), once web.cli is fully loaded, rather than at import time (circular).

retention_app = typer.Typer(
    no_args_is_help=True, help="Prune LangGraph checkpoints of runs that ended long ago."
)

MAX_REASON = 2000
_AGE = re.compile(r"^\s*([1-9][0-9]*)\s*([smhdw])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> timedelta:
    """``90m``, ``12h``, ``30d``, ``8w`` (a positive whole number and a unit) as a timedelta."""
    match = _AGE.match(text)
    if match is None:
        raise ValueError(f"not an age: {text!r} (use a number and s, m, h, d or w, e.g. 30d)")
    return timedelta(seconds=int(match.group(1)) * _UNIT_SECONDS[match.group(2)])


def runs_cancel(
    run_id: Annotated[str, typer.Argument(help="The run to cancel.")],
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (kept in the audit log).")
    ] = None,
    principal: Annotated[
        str | None, typer.Option("--as", help="Who cancels it (default cli:$USER).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Cancel a run that is running or waiting: its pending requests can no longer be decided,
    its queued resumes are skipped, and it never resumes. Exit 3: it already ended; 4: no such
    run."""
    from web.cli import EXIT_INVALID, default_principal, emit_json, fail, run_async

    if reason is not None and len(reason) > MAX_REASON:
        fail(f"--reason is longer than {MAX_REASON} characters", EXIT_INVALID)

    async def main(engine: Engine) -> dict[str, Any]:
        if not valid_run_id(run_id):
            raise InvalidRunId(run_id)
        cancelled = await PgOperations(engine.db).cancel(
            run_id, principal=principal or default_principal(), reason=reason
        )
        return cancelled.to_json()

    result = run_async(main)
    if as_json:
        emit_json(result)
        return
    typer.echo(
        f"run {result['run_id']} cancelled ({result['requests_cancelled']} pending request(s)"
        f" cancelled, {result['jobs_skipped']} queued resume(s) skipped)"
    )


@retention_app.command("prune")
def retention_prune(
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            help="Age, e.g. 30d, 12h, 8w (default APPROVALS_RETENTION_OLDER_THAN, 30d).",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be pruned; delete nothing.")
    ] = False,
    principal: Annotated[
        str | None, typer.Option("--as", help="Who prunes (default cli:$USER).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Delete the LangGraph checkpoints of threads whose runs all ended (completed, blocked,
    failed, cancelled) longer ago than --older-than. Runs, requests, decisions, tool executions
    and the audit log are kept whole; a thread with a run still running or waiting is never
    touched."""
    from web.cli import EXIT_INVALID, default_principal, emit_json, fail, run_async

    async def main(engine: Engine) -> dict[str, Any]:
        # The setting's own pattern admits only ages parse_age reads.
        text = older_than or engine.settings.retention_older_than
        pruned = await PgOperations(engine.db).prune(
            parse_age(text), principal=principal or default_principal(), dry_run=dry_run
        )
        return pruned.to_json() | {"older_than": text.strip()}

    if older_than is not None:
        try:
            parse_age(older_than)
        except ValueError as exc:
            fail(str(exc), EXIT_INVALID)
    result = run_async(main)
    if as_json:
        emit_json(result)
        return
    verb = "would prune" if result["dry_run"] else "pruned"
    typer.echo(
        f"{verb} the checkpoints of {result['threads']} thread(s) whose runs ended more than"
        f" {result['older_than']} ago: {result['checkpoints']} checkpoints,"
        f" {result['checkpoint_writes']} writes, {result['checkpoint_blobs']} blobs"
    )
    if result["busy_threads"]:
        typer.echo(f"{result['busy_threads']} thread(s) were busy; a later prune takes them")
