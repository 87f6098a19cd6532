"""``approvals grants``: an operator lists a run's standing grants and revokes one.

A standing grant is an approver's "always" for one tool in one run (``approvals.grants``);
revoking it makes the calls it covered ask a human again."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from web.cli.command import acting, emit_json, run_async

if TYPE_CHECKING:
    from web.engine import Engine

grants_app = typer.Typer(
    no_args_is_help=True, help="List and revoke standing grants (approve or reject always)."
)


def _line(grant: dict[str, Any]) -> str:
    state = f"revoked by {grant['revoked_by']}" if grant["revoked_by"] else "live"
    within = f" within {grant['within']}" if grant["within"] else ""
    return (
        f"{grant['id']}  {grant['decision']} {grant['tool']} (rule {grant['rule']}){within}"
        f"  by {grant['granted_by']}  used {grant['uses']}x  {state}"
    )


@grants_app.command("list")
def grants_list(
    run_id: Annotated[str, typer.Argument(help="The run whose grants to list.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Every standing grant made in a run, live and revoked, oldest first. Exit 2: a malformed
    run id."""

    async def main(engine: Engine) -> list[dict[str, Any]]:
        return [g.to_json() for g in await engine.grants_of(run_id, by="cli")]

    grants = run_async(main)
    if as_json:
        emit_json(grants)
        return
    if not grants:
        typer.echo("no standing grants in this run", err=True)
    for grant in grants:
        typer.echo(_line(grant))


@grants_app.command("revoke")
def grants_revoke(
    grant_id: Annotated[str, typer.Argument(help="The grant to revoke.")],
    principal: Annotated[
        str | None, typer.Option("--as", help="Who revokes (default cli:$USER).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Revoke a standing grant: the calls it covered ask a human again. Recorded in the audit
    log (grant.revoked). Revoking a revoked grant changes nothing. Exit 4: no such grant."""

    async def main(engine: Engine) -> dict[str, Any]:
        grant = await engine.revoke_grant(grant_id, by=await acting(engine, principal))
        return grant.to_json()

    grant = run_async(main)
    if as_json:
        emit_json(grant)
        return
    typer.echo(_line(grant))
