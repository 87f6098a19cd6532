"""``approvals tools list``: each graph's tools, with their arguments, conditions and metadata."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from web.cli.command import emit_json, run_async
from web.engine import Engine

tools_app = typer.Typer(no_args_is_help=True, help="The tools graphs may call.")


@tools_app.command("list")
def tools_list(
    graph: Annotated[str | None, typer.Argument(help="Only this graph's tools.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List each graph's tools with their arguments, conditions and metadata."""

    async def main(engine: Engine) -> dict[str, list[dict[str, Any]]]:
        names = [graph] if graph is not None else engine.registry.names()
        return {name: [t.describe() for t in engine.registry.tools(name)] for name in names}

    listing = run_async(main)
    if as_json:
        emit_json(listing)
        return
    for name, tools in listing.items():
        typer.echo(f"{name}:")
        for t in tools:
            mark = "needs approval" if t["sensitive"] else "runs directly"
            typer.echo(f"  {t['name']} ({mark}): {t['description'].splitlines()[0]}")
            for rule in t["preconditions"]:
                typer.echo(f"    before: {rule['name']}: {rule['description']}")
            for rule in t["postconditions"]:
                typer.echo(f"    after:  {rule['name']}: {rule['description']}")
