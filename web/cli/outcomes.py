"""``approvals outcomes``: calls whose outcome is unknown, for operators to reconcile.

A call whose process died while it ran is never run again. Its run waits on a reconciliation
request (tool ``@reconcile:<tool>``, decided by the operator group): approve it when the call
took effect, reject it (with a reason) when it did not; the run then goes on with that answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from web.cli.command import emit_listing, run_async

if TYPE_CHECKING:
    from web.engine import Engine

outcomes_app = typer.Typer(help="Calls whose outcome is unknown.", no_args_is_help=True)


@outcomes_app.command("list")
def outcomes_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Executions whose outcome is unknown, and the request that reconciles each."""

    async def main(engine: Engine) -> list[dict[str, Any]]:
        return [
            {
                "run_id": str(row["run_id"]),
                "call_id": row["call_id"],
                "tool": row["tool"],
                "started_at": row["started_at"].isoformat(),
                "request_id": str(row["request_id"]) if row["request_id"] else None,
            }
            for row in await engine.ledger.unknown_outcomes()
        ]

    def line(item: dict[str, Any]) -> str:
        how = (
            f"decide {item['request_id']} approve|reject --reason ..."
            if item["request_id"]
            else "its run has not been resumed yet"
        )
        return f"{item['run_id']}  {item['call_id']}  {item['tool']}  ({how})"

    emit_listing(
        run_async(main), as_json=as_json, empty="no call has an unknown outcome", line=line
    )
