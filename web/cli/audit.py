"""``approvals audit``: verify the decision log's hash chain, and export it.

``verify`` exits 0 when every event links to the one before it and matches its content, 1
naming the first event that was changed, removed or inserted (an event whose data is nested too
deeply to be read back counts as changed, whatever its hash). ``--anchor FILE`` also checks the
anchors ``anchor`` wrote: each must be signed and linked as written, and its event must still
have its hash; a rewritten chain whose hashes were all recomputed fails here. ``export`` streams
events to stdout (JSON lines or CSV), oldest first; an event whose data cannot be read back is
written with ``"data": null, "data_unreadable": true`` (in CSV, a data cell that is not JSON
saying so). Exit 2: an invalid option.
"""

from __future__ import annotations

import contextlib
import csv
import enum
import json
import math
import re
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from approvals import anchor as anchors
from approvals.anchor import Anchor
from approvals.audit import UNREADABLE_DATA, format_at
from web.cli.command import (
    EXIT_FAILURE,
    EXIT_INVALID,
    emit_json,
    fail,
    guarded,
    load_settings,
    run_async,
)

if TYPE_CHECKING:
    from web.engine import Engine, Verification

audit_app = typer.Typer(no_args_is_help=True, help="The tamper-evident decision log.")

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
    anchor: Annotated[
        Path | None,
        typer.Option("--anchor", help="Also check every anchor in this file (`audit anchor`)."),
    ] = None,
) -> None:
    """Walk the hash chain; exit 1 naming the first event changed, removed or inserted."""

    anchors: list[Anchor] | None = None
    if anchor is not None:
        if not anchor.is_file():
            fail(f"--anchor: no such file: {anchor}", EXIT_INVALID)
        # Imported here, not at the top: web.audit_anchor imports httpx and the settings
        # (about 0.2 s), which only the commands that read or write anchors need.
        from web.audit_anchor import anchor_key, read_file

        path = anchor
        anchors = guarded(lambda: read_file(path, anchor_key(load_settings(), create=False)))
        if not anchors:
            fail(f"--anchor: {anchor} holds no anchors", EXIT_INVALID)

    async def main(engine: Engine) -> Verification:
        return await engine.audit.verify(anchors)

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
            | ({"anchors": result.anchors} if result.anchors is not None else {})
        )
        if result.finding is not None:
            raise typer.Exit(EXIT_FAILURE)
        return
    if result.finding is not None:
        fail(f"audit log tampered with: {result.finding.message}", EXIT_FAILURE)
    held = f"; {result.anchors} anchors hold" if result.anchors is not None else ""
    typer.echo(f"audit log verified: {result.events} events, head {result.head}{held}")


@audit_app.command("anchor")
def audit_anchor(
    to: Annotated[
        Path | None, typer.Option("--to", help="Append the signed head to this file.")
    ] = None,
    webhook: Annotated[
        str | None, typer.Option("--webhook", help="POST the signed head to this URL.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Verify the chain (and the anchors already in --to), then record its head, signed, outside
    the database. Run it on a schedule (docs/operations.md)."""

    if to is None and webhook is None:
        fail("give --to FILE, --webhook URL or both", EXIT_INVALID)
    if webhook is not None and not _http_url(webhook):
        fail(f"--webhook is not an http(s) URL: {webhook[:80]!r}", EXIT_INVALID)
    if to is not None and ((to.exists() and not to.is_file()) or not to.parent.is_dir()):
        fail(f"--to is not a file in an existing directory: {to}", EXIT_INVALID)
    # Imported here, not at the top: web.audit_anchor imports httpx and the settings (about
    # 0.2 s), which only the commands that read or write anchors need.
    from web.audit_anchor import AnchorFile, anchor_key, post

    async def main(engine: Engine) -> tuple[Verification, Anchor | None]:
        key = anchor_key(engine.settings, create=True)
        if to is not None:
            with AnchorFile(to, key) as file:
                result = await engine.audit.verify(file.anchors)
                if result.finding is not None:
                    return result, None
                signed = file.append(result.last_id, result.head)
        else:
            result = await engine.audit.verify()
            if result.finding is not None:
                return result, None
            signed = anchors.sign(key, event_id=result.last_id, hash=result.head, previous=None)
        if webhook is not None:
            await post(webhook, signed, key, seconds=engine.settings.notify_timeout_seconds)
        return result, signed

    result, signed = run_async(main)
    if result.finding is not None or signed is None:
        assert result.finding is not None
        fail(f"nothing anchored: audit log tampered with: {result.finding.message}", EXIT_FAILURE)
    if as_json:
        emit_json(json.loads(signed.line()))
        return
    where = " and ".join(str(w) for w in (to, webhook) if w is not None)
    typer.echo(f"anchored event {signed.event_id} (hash {signed.hash}) to {where}")


def _http_url(value: str) -> bool:
    """Whether ``value`` is an http(s) URL with a host that a request can be sent to, checked
    before anything is anchored (a bad port or bracket failed the post after the file had the
    anchor)."""
    if not re.match(r"^https?://[^\s/]+", value):
        return False
    # Imported here, not at the top: httpx (about 0.1 s) only for a command given --webhook.
    import httpx

    try:
        return bool(httpx.URL(value).host)
    except (httpx.InvalidURL, ValueError):
        return False


def _since(value: str | None) -> datetime | None:

    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        fail(f"--since is not an ISO 8601 time: {value[:80]!r}", EXIT_INVALID)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _run_id(value: str | None) -> str | None:

    if value is None:
        return None
    try:
        return str(uuid.UUID(value))
    except ValueError:
        fail(f"--run is not a run id: {value[:80]!r}", EXIT_INVALID)


def export_record(row: dict[str, Any]) -> dict[str, Any]:
    """An event as exported: its columns, ids as text, the time as the chain hashes it; and
    ``"data_unreadable": true`` (``data`` then ``None``) for data that could not be read back,
    the only record with that key, so an export of an untouched log is as it always was."""
    record = {name: row.get(name) for name in COLUMNS}
    record["at"] = format_at(row["at"])
    for name in ("run_id", "request_id"):
        if record[name] is not None:
            record[name] = str(record[name])
    if row.get("data_unreadable") or not _finite(record["data"]):
        # A number jsonb keeps and a float cannot (a 400-digit decimal reads as Infinity, which
        # is no JSON): written as unreadable, never as a value no JSON reader takes.
        record["data"] = None
        record["data_unreadable"] = True
    return record


def _write(writer: Any, output: ExportFormat, record: dict[str, Any]) -> None:
    """One exported event on stdout, as a CSV row or a JSON line."""
    if output is ExportFormat.CSV:
        # Unreadable data: words no JSON reader takes for the event's data.
        data = (
            UNREADABLE_DATA
            if record.pop("data_unreadable", False)
            else json.dumps(record["data"], sort_keys=True, separators=(",", ":"))
        )
        writer.writerow(["" if v is None else v for v in {**record, "data": data}.values()])
    else:
        sys.stdout.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")


def _finite(value: Any) -> bool:
    """Whether ``value`` holds no infinite or NaN float (iteratively: data is shallow, but a
    reader never trusts that)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return False
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


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

    start, run_id = _since(since), _run_id(run)

    async def main(engine: Engine) -> int:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        if output is ExportFormat.CSV:
            writer.writerow(COLUMNS)
        count, reader_gone = 0, False
        # Closed here, not at the loop's shutdown: a reader that went (``| head -1``) ends the
        # stream with its cursor closed in order, not cancelled mid-fetch (which psycopg
        # reported on stderr as "error ignored in rollback").
        rows = engine.audit.export(since=start, run_id=run_id)
        async with contextlib.aclosing(rows):
            async for row in rows:
                try:
                    _write(writer, output, export_record(row))
                except BrokenPipeError:
                    reader_gone = True
                    break
                count += 1
        if reader_gone:
            raise BrokenPipeError  # the command ends as SIGPIPE ends one (web.cli.command)
        sys.stdout.flush()
        return count

    run_async(main)
