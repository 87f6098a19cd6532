"""``approvals notifications``: the delivery log, for operators, without SQL.

``list`` shows deliveries (one per request, channel and escalation level), newest first;
``log REQUEST_ID`` shows every attempt made for one request, on every channel. Exit codes
follow the CLI's: 2 for a malformed request id, status or limit.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from web.cli.command import emit_listing, run_async

if TYPE_CHECKING:
    from web.engine import Engine

notifications_app = typer.Typer(
    no_args_is_help=True, help="What was sent to approvers, and what became of it."
)

MAX_LIMIT = 10_000


class DeliveryStatus(StrEnum):
    sending = "sending"
    retry = "retry"
    sent = "sent"
    failed = "failed"
    skipped = "skipped"
    cancelled = "cancelled"


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _row(row: dict[str, Any]) -> dict[str, Any]:
    return {key: _json_value(value) for key, value in row.items()}


@notifications_app.command("list")
def notifications_list(
    request_id: Annotated[
        str | None, typer.Option("--request", help="Only the deliveries of this request.")
    ] = None,
    status: Annotated[
        DeliveryStatus | None, typer.Option("--status", help="Only deliveries in this status.")
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=MAX_LIMIT, help="At most this many.")
    ] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Deliveries, newest first: channel, event, escalation level, status, attempts, last
    error."""

    async def main(engine: Engine) -> list[dict[str, Any]]:
        # Imported here, not at the top: approvals.decisions imports jsonschema (about 0.05 s),
        # which ``--help`` does not need; the engine open by now has imported it.
        from approvals.decisions import parse_request_id

        wanted = parse_request_id(request_id) if request_id is not None else None
        rows = await engine.notifications.deliveries(
            request_id=wanted, status=status.value if status else None, limit=limit
        )
        return [_row(row) for row in rows]

    def line(item: dict[str, Any]) -> str:
        error = f"  last error: {item['last_error']}" if item["last_error"] else ""
        return (
            f"{item['created_at']}  {item['request_id']}  {item['tool']}  {item['channel']}  "
            f"{item['event']} (level {item['escalation_level']})  {item['status']} after "
            f"{item['attempts']} attempt(s){error}"
        )

    emit_listing(run_async(main), as_json=as_json, empty="no notification deliveries", line=line)


@notifications_app.command("log")
def notifications_log(
    request_id: Annotated[str, typer.Argument(help="The request whose attempts to show.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Every attempt to notify about one request, on every channel, in order."""

    async def main(engine: Engine) -> list[dict[str, Any]]:
        # Imported here, not at the top: approvals.decisions imports jsonschema (see list).
        from approvals.decisions import parse_request_id

        rows = await engine.notifications.attempts(parse_request_id(request_id))
        return [_row(row) for row in rows]

    def line(item: dict[str, Any]) -> str:
        code = f" {item['response_code']}" if item["response_code"] is not None else ""
        error = f"  {item['error']}" if item["error"] else ""
        return (
            f"{item['at']}  {item['channel']}  {item['event']} (level "
            f"{item['escalation_level']})  attempt {item['attempt']}: {item['status']}{code}"
            f"{error}"
        )

    emit_listing(
        run_async(main),
        as_json=as_json,
        empty=f"no notification was attempted for request {request_id}",
        line=line,
    )
