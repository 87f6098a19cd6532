"""``approvals audit``: verify the decision log's hash chain, and export it.

``verify`` exits 0 when every event links to the one before it and matches its content, 1
naming the first event that was changed, removed or inserted. ``export`` streams events to
stdout (JSON lines or CSV), oldest first. Exit 2: an invalid option.
"""

from __future__ import annotations

import csv
import enum
import json
import sys
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from approvals.audit import format_at
from storage.audit import Verification
from web.engine import Engine

audit_app = typer.Typer(no_args_is_help=True, help="The tamper-evident decision log.")

# web.cli registers this sub-app, so its helpers are imported when a command runs (see
# web.cli_accounts).

COLUMNS = (
    "id",
    "at",
    "kind",
    "run_id",
    "request_id",
    "call_id",
    "tool",
    "principal",
    "state_version",
    "data",
    "prev_hash",
    "hash",
)


class ExportFormat(enum.StrEnum):
    JSONL = "jsonl"
    CSV = "csv"


@audit_app.command("verify")
def audit_verify(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Walk the hash chain; exit 1 naming the first event changed, removed or inserted."""
    from web.cli import EXIT_FAILURE, emit_json, fail, run_async

    async def main(engine: Engine) -> Verification:
        return await engine.audit.verify()

    result = run_async(main)
    if as_json:
        emit_json(
            {
                "ok": result.ok,
                "events": result.events,
                "last_id": result.last_id,
                "head": result.head,
                "finding": result.finding.to_json() if result.finding else None,
            }
        )
        if result.finding is not None:
            raise typer.Exit(EXIT_FAILURE)
        return
    if result.finding is not None:
        fail(f"audit log tampered with: {result.finding.message}", EXIT_FAILURE)
    typer.echo(f"audit log verified: {result.events} events, head {result.head}")


def _since(value: str | None) -> datetime | None:
    from web.cli import EXIT_INVALID, fail

    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        fail(f"--since is not an ISO 8601 time: {value[:80]!r}", EXIT_INVALID)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _run_id(value: str | None) -> str | None:
    from web.cli import EXIT_INVALID, fail

    if value is None:
        return None
    try:
        return str(uuid.UUID(value))
    except ValueError:
        fail(f"--run is not a run id: {value[:80]!r}", EXIT_INVALID)


def export_record(row: dict[str, Any]) -> dict[str, Any]:
    """An event as exported: its columns, ids as text, the time as the chain hashes it."""
    record = {name: row.get(name) for name in COLUMNS}
    record["at"] = format_at(row["at"])
    for name in ("run_id", "request_id"):
        if record[name] is not None:
            record[name] = str(record[name])
    return record


@audit_app.command("export")
def audit_export(
    since: Annotated[
        str | None, typer.Option("--since", help="Only events at or after this ISO 8601 time.")
    ] = None,
    output: Annotated[
        ExportFormat, typer.Option("--format", help="jsonl (one object a line) or csv.")
    ] = ExportFormat.JSONL,
    run: Annotated[str | None, typer.Option("--run", help="Only this run's events.")] = None,
) -> None:
    """Write the log's events to stdout, oldest first."""
    from web.cli import run_async

    start, run_id = _since(since), _run_id(run)

    async def main(engine: Engine) -> int:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        if output is ExportFormat.CSV:
            writer.writerow(COLUMNS)
        count = 0
        async for row in engine.audit.export(since=start, run_id=run_id):
            record = export_record(row)
            if output is ExportFormat.CSV:
                data = json.dumps(record["data"], sort_keys=True, separators=(",", ":"))
                writer.writerow(["" if v is None else v for v in {**record, "data": data}.values()])
            else:
                sys.stdout.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")
            count += 1
        sys.stdout.flush()
        return count

    run_async(main)
