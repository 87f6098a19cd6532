"""``approvals policy``: check a policy file and run its table of cases. No database needed,
except by ``check --graph NAME``, which builds the graph to know its tools.

Exit codes follow the CLI's: 0 success, 1 a case failed, 2 a file is invalid (the error is one
line on stderr, ``error: FILE:LINE: reason``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from web.cli.command import EXIT_FAILURE, EXIT_INVALID, emit_json, run_async

if TYPE_CHECKING:
    from approvals.policy import Policy, PolicyError
    from web.engine import Engine

policy_app = typer.Typer(
    no_args_is_help=True, help="Declarative policies: check them, test them against cases."
)

PolicyFile = Annotated[Path, typer.Argument(help="A policy file (YAML).", show_default=False)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")]


def _invalid(exc: PolicyError, as_json: bool) -> NoReturn:
    if as_json:
        emit_json({"file": exc.source, "ok": False, "line": exc.line, "reason": exc.reason})
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(EXIT_INVALID)


def _load(path: Path, as_json: bool) -> Policy:
    # Imported here, not at the top: the policy engine imports cel, whose package imports its
    # own REPL (prompt_toolkit): about 0.1 s that only the policy commands need.
    from approvals.policy import PolicyError, load_policy

    try:
        return load_policy(path)
    except PolicyError as exc:
        _invalid(exc, as_json)


GraphOption = Annotated[
    str | None,
    typer.Option(
        "--graph",
        metavar="NAME",
        help="Also check that every rule's tool names a tool of this registered graph, as "
        "registering the graph with this policy would (opens the database to build it).",
        show_default=False,
    ),
]


def _graph_tools(graph: str) -> list[str]:
    """The tool names of the registered graph ``graph`` (built as the engine builds it)."""

    async def main(engine: Engine) -> list[str]:
        await engine.registry.load(graph)
        return sorted({t["name"] for t in engine.registry.describe_tools(graph)})

    return run_async(main)


@policy_app.command("check")
def check(file: PolicyFile, as_json: JsonOption = False, graph: GraphOption = None) -> None:
    """Load a policy and report the first mistake in it (FILE:LINE: reason), if any; with
    --graph NAME, also a rule whose tool is none of that graph's tools."""
    policy = _load(file, as_json)
    if graph is not None:
        # Imported here, not at the top: the policy engine imports cel (see _load).
        from approvals.policy import PolicyError, check_tool_names

        try:
            check_tool_names(policy, _graph_tools(graph), graph=graph)
        except PolicyError as exc:
            _invalid(exc, as_json)
    if as_json:
        emit_json(
            {
                "file": str(file),
                "ok": True,
                "policy": policy.name,
                "version": policy.version,
                "default": policy.default.value,
                "points": sorted(p.value for p in policy.points),
                "rules": [rule.to_json() for rule in policy.rules],
                **({"graph": graph} if graph is not None else {}),
            }
        )
        return
    count = len(policy.rules)
    against = f"; its tools are graph {graph!r}'s" if graph is not None else ""
    typer.echo(f"{file}: ok ({count} rule{'' if count == 1 else 's'}{against})")


@policy_app.command("test")
def run_test_cases(
    file: PolicyFile,
    cases: Annotated[
        Path, typer.Argument(help="A cases file (YAML) for the policy.", show_default=False)
    ],
    as_json: JsonOption = False,
) -> None:
    """Run every case of CASES through the policy FILE; exit 1 if any case fails."""
    # Imported here, not at the top: the policy engine imports cel and prompt_toolkit (see _load).
    from approvals.policy import PolicyError, load_cases, run_cases

    policy = _load(file, as_json)
    try:
        table = load_cases(cases)
    except PolicyError as exc:
        _invalid(exc, as_json)
    results = run_cases(policy, table)
    failed = sum(1 for r in results if not r.passed)
    passed = len(results) - failed
    if as_json:
        emit_json(
            {
                "policy": policy.name,
                "file": str(file),
                "cases_file": str(cases),
                "passed": passed,
                "failed": failed,
                "cases": [r.to_json() for r in results],
            }
        )
    else:
        for result in results:
            if result.passed:
                typer.echo(f"PASS {result.name}")
            else:
                typer.echo(
                    f"FAIL {result.name}: expected {result.expected}, got {result.got} "
                    f"({table.source}:{result.line})"
                )
        typer.echo(f"{passed} passed, {failed} failed")
    if failed:
        raise typer.Exit(EXIT_FAILURE)
