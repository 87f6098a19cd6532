"""``approvals tools list``: each graph's tools, with their arguments, conditions and metadata
(an OpenAI-SDK agent's function tools with their argument schema and ``needs_approval``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from web.cli.command import emit_json, run_async

if TYPE_CHECKING:
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
        for name in names:
            await engine.registry.load(name)
        return {name: engine.registry.describe_tools(name) for name in names}

    listing = run_async(main)
    if as_json:
        emit_json(listing)
        return
    for name, tools in listing.items():
        typer.echo(f"{name}:")
        for t in tools:
            mark = _approval_mark(t)
            summary = (t["description"] or "").splitlines()[:1]
            typer.echo(f"  {t['name']} ({mark}): {''.join(summary)}")
            for rule in t["preconditions"]:
                typer.echo(f"    before: {rule['name']}: {rule['description']}")
            for rule in t["postconditions"]:
                typer.echo(f"    after:  {rule['name']}: {rule['description']}")


def _approval_mark(tool: dict[str, Any]) -> str:
    """Whether the tool's own setting asks a human (policies may ask about any call)."""
    needs = tool.get("needs_approval")
    if needs == "per call":
        return "needs approval for some calls"
    return "needs approval" if tool["sensitive"] else "runs directly"
