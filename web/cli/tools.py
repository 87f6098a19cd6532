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
        return {name: _with_policy(engine, name) for name in names}

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
            for said in t["policy"]:
                typer.echo(f"    policy: {_policy_line(said)}")
            for rule in t["preconditions"]:
                typer.echo(f"    before: {rule['name']}: {rule['description']}")
            for rule in t["postconditions"]:
                typer.echo(f"    after:  {rule['name']}: {rule['description']}")


def _with_policy(engine: Engine, name: str) -> list[dict[str, Any]]:
    """Graph ``name``'s tools, each with what its policies do with a call of it (``policy``:
    the rules that may apply, in order, then each policy's default)."""
    # Imported here, not at the top: the policy engine (CEL) is imported only by the commands
    # that read policies (tests/unit/test_cli_imports.py).
    from approvals.policy import policy_for_tool

    governance = engine.registry.governance(name)
    interceptors = list(governance.interceptors) if governance is not None else []
    return [
        {**tool, "policy": policy_for_tool(interceptors, tool["name"])}
        for tool in engine.registry.describe_tools(name)
    ]


def _approval_mark(tool: dict[str, Any]) -> str:
    """Whether a call of the tool may wait for a human: by its own setting, or because a rule
    of its policy (or a policy's default) escalates it."""
    needs = tool.get("needs_approval")
    escalated = [p for p in tool.get("policy", ()) if p["action"] == "escalate"]
    unconditional = any(p["when"] is None for p in escalated)
    if tool["sensitive"] or (escalated and unconditional and _first_is_escalate(tool)):
        return "needs approval"
    if needs == "per call" or escalated:
        return "needs approval for some calls"
    if any(p["action"] == "deny" for p in tool.get("policy", ())):
        return "runs unless a policy denies it"
    return "runs directly"


def _first_is_escalate(tool: dict[str, Any]) -> bool:
    """Whether the first unconditional entry of the tool's policy escalates."""
    for said in tool.get("policy", ()):
        if said["when"] is None:
            return bool(said["action"] == "escalate")
    return False


def _policy_line(said: dict[str, Any]) -> str:
    """One policy entry as text: ``escalate to support when args.amount <= 100 (rule
    small-refunds of refund)``, or a policy's default."""
    what = str(said["action"])
    if said["approvers"]:
        what += " to " + ", ".join(said["approvers"])
    if said["when"]:
        what += f" when {said['when']}"
    where = f"rule {said['rule']} of {said['policy']}" if said["rule"] else said["policy"]
    kind = "" if said["rule"] else "default: "
    return f"{kind}{what} ({where})"
