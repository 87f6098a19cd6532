"""``approvals pending list`` and ``approvals decide``: the calls waiting for a decision, and
deciding one.

Exit codes follow the CLI's: 2 invalid input (a malformed id, verdict or edit), 3 the request
is no longer pending, 4 no such request.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from approvals.model import RequestStatus
from web.cli.command import default_principal, emit_json, emit_listing, parse_json, run_async
from web.engine import Engine

pending_app = typer.Typer(no_args_is_help=True, help="Calls waiting for a decision.")


@pending_app.command("list")
def pending_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    include_all: Annotated[bool, typer.Option("--all", help="Include decided requests.")] = False,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 200,
) -> None:
    """List approval requests waiting for a decision (newest first)."""

    async def main(engine: Engine) -> list[dict[str, Any]]:
        status = None if include_all else RequestStatus.PENDING
        return [r.to_json() for r in await engine.requests.search(status, limit)]

    emit_listing(
        run_async(main),
        as_json=as_json,
        empty="nothing is waiting for a decision",
        line=lambda r: (
            f"{r['id']}  {r['tool']}  {json.dumps(r['shown'].get('args'))}  {r['status']}"
        ),
    )


def decide_command(
    request_id: str,
    verdict: Annotated[
        str,
        typer.Argument(help="approve, reject or respond", metavar="approve|reject|respond"),
    ],
    principal: Annotated[
        str,
        typer.Option(
            "--as",
            help="The name to decide in (required): an operator's override of the approver"
            " rules, recorded as one in the audit log.",
        ),
    ],
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (required to reject).")
    ] = None,
    args: Annotated[
        str | None,
        typer.Option("--args", help="Edited arguments (JSON object) to approve instead."),
    ] = None,
    message: Annotated[
        str | None,
        typer.Option(
            "--message", help="With respond: the answer the model gets as the tool's result."
        ),
    ] = None,
) -> None:
    """Approve, reject or respond to a pending call (respond: the tool does not run; --message
    is its result). Exit 3: no longer pending; 4: no such request.

    Whoever runs the CLI holds the database, so the approver rules do not bind it: the decision
    is an operator's override, in --as's name, and its audit event says so (override_by:
    cli:$USER). Approvers decide in the web app or through the API."""
    edited = parse_json("--args", args) if args is not None else None

    async def main(engine: Engine) -> dict[str, Any]:
        decision = await engine.decide_as_operator(
            request_id,
            verdict,
            principal=principal,
            override_by=default_principal(),
            reason=reason,
            args=edited,
            message=message,
        )
        return decision.to_json()

    emit_json(run_async(main))
