"""``approvals retention prune``: delete what runs that ended long ago leave behind.

Exit codes follow the CLI's: 2 invalid input (a bad age).
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from approvals.errors import InvalidValue
from web.cli.command import EXIT_INVALID, acting, emit_json, fail, run_async

if TYPE_CHECKING:
    from web.engine import Engine

retention_app = typer.Typer(
    no_args_is_help=True,
    help="Delete the checkpoints and records of runs that ended long ago.",
)

_AGE = re.compile(r"^\s*([1-9][0-9]*)\s*([smhdw])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> timedelta:
    """``90m``, ``12h``, ``30d``, ``8w`` (a positive whole number and a unit) as a timedelta.
    ``ValueError`` otherwise; how long an age the engine takes is its own rule (a century)."""
    match = _AGE.match(text)
    if match is None:
        raise ValueError(f"not an age: {text!r} (use a number and s, m, h, d or w, e.g. 30d)")
    try:
        return timedelta(seconds=int(match.group(1)) * _UNIT_SECONDS[match.group(2)])
    except OverflowError:
        raise ValueError(f"not an age: {text!r} is longer than any age can be") from None


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
    checkpoints_only: Annotated[
        bool,
        typer.Option(
            "--checkpoints-only",
            help="Delete only LangGraph's checkpoints; keep the engine's records of the runs.",
        ),
    ] = False,
    principal: Annotated[
        str | None, typer.Option("--as", help="Who prunes (default cli:$USER).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Delete what threads whose runs all ended (completed, blocked, failed, cancelled) longer
    ago than --older-than still hold: LangGraph's checkpoints and the engine's records of those
    runs (requests, decisions, votes, resume jobs, tool executions, interception records, run
    events, notification deliveries), then expired web sessions. The audit log stays whole and
    verifiable (`approvals audit verify`); `approvals runs show` says a pruned run was pruned. A
    thread with a run still running or waiting is never touched; one with a request pending, a
    resume queued or a notification being sent keeps its records until a later prune."""

    async def main(engine: Engine) -> dict[str, Any]:
        text = older_than or engine.settings.retention_older_than
        try:
            age = parse_age(text)
        except ValueError as exc:
            # The setting's pattern admits a number too big for any age.
            raise InvalidValue("APPROVALS_RETENTION_OLDER_THAN", str(exc)) from None
        pruned = await engine.prune(
            age,
            principal=await acting(engine, principal),
            dry_run=dry_run,
            checkpoints_only=checkpoints_only,
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
    typer.echo(summary(result))
    if result["busy_threads"]:
        typer.echo(f"{result['busy_threads']} thread(s) were busy; a later prune takes them")
    if result["held_threads"]:
        typer.echo(
            f"{result['held_threads']} thread(s) keep their records for now (a request still"
            " pending, a resume queued or a notification being sent); a later prune takes them"
        )


def summary(result: dict[str, Any]) -> str:
    """One line: what a prune deleted (or would)."""
    verb = "would prune" if result["dry_run"] else "pruned"
    checkpoints = (
        f"{result['checkpoints']} checkpoints, {result['checkpoint_writes']} writes,"
        f" {result['checkpoint_blobs']} blobs"
    )
    if result["checkpoints_only"]:
        return (
            f"{verb} the checkpoints of {result['threads']} thread(s) whose runs ended more"
            f" than {result['older_than']} ago: {checkpoints}"
        )
    records = sum(result["records"].values()) - result["runs"]
    return (
        f"{verb} {result['threads']} thread(s) whose runs ended more than"
        f" {result['older_than']} ago: {checkpoints}; {result['runs']} run(s) and {records}"
        f" other record(s); {result['web_sessions']} expired web session(s)"
    )
