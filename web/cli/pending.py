"""``approvals pending list`` and ``approvals decide``: the calls waiting for a decision, and
deciding one.

Exit codes follow the CLI's: 2 invalid input (a malformed id, verdict or edit), 3 the request
is no longer pending, 4 no such request.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from approvals.decision_kinds import Ruling, spoken
from approvals.listing import MAX_PAGE, PendingOrder, RequestFilter
from web.cli.command import (
    EXIT_INVALID,
    default_principal,
    emit_json,
    emit_listing,
    fail,
    parse_json,
    run_async,
)

if TYPE_CHECKING:
    from web.engine import Engine

pending_app = typer.Typer(no_args_is_help=True, help="Calls waiting for a decision.")

#: In place of the arguments of a request whose shown copy could not be read back.
UNREADABLE_SHOWN = "<unreadable: stored copy changed>"
#: Before the arguments of a request whose stored copy reads back, but is not the one recorded.
CHANGED_SHOWN = "<changed: not the copy recorded>"


def shown_args(request: dict[str, Any]) -> str:
    """A listed request's shown arguments as one line of JSON, ``UNREADABLE_SHOWN``, or the
    stored arguments after ``CHANGED_SHOWN`` when they are not those recorded."""
    if request["shown_unreadable"]:
        return UNREADABLE_SHOWN
    args = json.dumps(request["shown"].get("args"))
    return f"{CHANGED_SHOWN} {args}" if request["shown_changed"] else args


@pending_app.command("list")
def pending_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    include_all: Annotated[
        bool,
        typer.Option(
            "--all", help="The newest requests of any status instead (one page, no cursor)."
        ),
    ] = False,
    limit: Annotated[int, typer.Option(min=1, max=MAX_PAGE, help="Rows per page.")] = 200,
    cursor: Annotated[
        str | None,
        typer.Option("--cursor", help="Where the next page starts (printed after a page)."),
    ] = None,
    newest: Annotated[
        bool, typer.Option("--newest", help="Newest first (default: soonest deadline first).")
    ] = False,
    tool: Annotated[str | None, typer.Option("--tool", help="Only calls of this tool.")] = None,
    group: Annotated[
        str | None, typer.Option("--group", help="Only calls this approver group may decide.")
    ] = None,
    run: Annotated[str | None, typer.Option("--run", help="Only calls of this run.")] = None,
    starter: Annotated[
        str | None, typer.Option("--starter", help="Only calls of runs this principal started.")
    ] = None,
) -> None:
    """List approval requests waiting for a decision, soonest deadline first, a page at a
    time: when there is more, stderr says which --cursor gives the next page."""
    if include_all and cursor is not None:
        fail("--all lists one page of requests of any status: it takes no --cursor", EXIT_INVALID)

    async def main(engine: Engine) -> tuple[list[dict[str, Any]], str | None]:
        if include_all:
            found = await engine.newest_requests(limit, viewer=default_principal())
            return [r.to_json() for r in found], None
        page = await engine.pending_page(
            None,
            order=PendingOrder.NEWEST if newest else PendingOrder.DEADLINE,
            filters=RequestFilter(tool=tool, group=group, run_id=run, starter=starter),
            cursor=cursor,
            limit=limit,
        )
        return [r.to_json() for r, _ in page.items], page.next_cursor

    items, next_cursor = run_async(main)
    emit_listing(
        items,
        as_json=as_json,
        empty="nothing is waiting for a decision",
        line=lambda r: f"{r['id']}  {r['tool']}  {shown_args(r)}  {r['status']}",
    )
    if next_cursor is not None:
        typer.echo(f"more: approvals pending list --cursor {next_cursor}", err=True)


def decide_command(
    request_id: str,
    verdict: Annotated[
        str,
        # The verdicts of approvals.decision_kinds (an edit is an approve with --args).
        typer.Argument(help=spoken(Ruling), metavar="|".join(Ruling)),
    ],
    principal: Annotated[
        str,
        typer.Option(
            "--as",
            help="The person to decide in (required): an account NAME (local:NAME), or"
            " oidc:ISSUER#SUBJECT. An operator's override of the approver rules, recorded as"
            " one in the audit log.",
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
    always: Annotated[
        bool,
        typer.Option(
            "--always",
            help="Approve (as shown) or reject the rest of the run's calls of this tool that"
            " its rule escalates, within its bounds: a standing grant, where the rule's"
            " allow_always offers it (approvals grants revoke takes it back).",
        ),
    ] = False,
) -> None:
    """Approve, reject or respond to a pending call (respond: the tool does not run; --message
    is its result). Exit 3: no longer pending; 4: no such request.

    Whoever runs the CLI holds the database, so the approver rules do not bind it: the decision
    is an operator's override, in --as's name, and its audit event says so (override_by:
    cli:$USER). --as names a person: an account NAME is recorded as local:NAME, the principal
    its web sign-in has; a name that is no account, or a principal that is no person
    (cli:deploy-bot), is refused (exit 2). Approvers decide in the web app or through the
    API."""
    edited = parse_json("--args", args) if args is not None else None

    async def main(engine: Engine) -> dict[str, Any]:
        decision = await engine.decide_as_operator(
            request_id,
            verdict,
            principal=await engine.console_principal(principal, deciding=True),
            override_by=default_principal(),
            reason=reason,
            args=edited,
            message=message,
            always=always,
        )
        return decision.to_json()

    emit_json(run_async(main))
