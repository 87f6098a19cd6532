"""The CLI package's shape: the shared module imports no command group, no group imports
another, and every import inside a function says why it is not at the top (a heavy import
delayed, never an import loop dodged)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CLI = Path(__file__).resolve().parents[2] / "web" / "cli"
SHARED = "web.cli.command"
GROUPS = sorted(
    f"web.cli.{path.stem}" for path in CLI.glob("*.py") if path.stem not in ("__init__", "command")
)


def imported(path: Path) -> set[str]:
    """The modules a file imports, wherever in the file."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_there_are_command_groups_to_check() -> None:
    assert {"web.cli.runs", "web.cli.pending", "web.cli.accounts", "web.cli.policy"} <= set(GROUPS)


def test_the_shared_module_imports_no_command_group() -> None:
    assert not {name for name in imported(CLI / "command.py") if name.startswith("web.cli")}


@pytest.mark.parametrize("group", GROUPS)
def test_a_command_group_imports_only_the_shared_module_of_the_cli(group: str) -> None:
    path = CLI / f"{group.removeprefix('web.cli.')}.py"
    others = {
        name
        for name in imported(path)
        if name.startswith("web.cli") and name != SHARED and not name.startswith(f"{SHARED}.")
    }
    assert not others, f"{group} imports {sorted(others)}: share it through {SHARED}"


def local_imports(path: Path) -> list[int]:
    """The line of each import inside a function."""
    return [
        inner.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for inner in ast.walk(node)
        if isinstance(inner, ast.Import | ast.ImportFrom)
    ]


def test_some_import_inside_a_command_is_checked() -> None:
    assert any(local_imports(path) for path in CLI.glob("*.py"))


@pytest.mark.parametrize("path", sorted(CLI.glob("*.py")), ids=lambda p: p.name)
def test_an_import_inside_a_command_says_it_delays_a_heavy_import(path: Path) -> None:
    lines = path.read_text().splitlines()
    for line in local_imports(path):
        comment = " ".join(text.strip() for text in lines[max(0, line - 4) : line - 1])
        assert "Imported here, not at the top" in comment, (
            f"{path.name}:{line}: an import inside a function, without a comment saying which"
            " heavy import it delays"
        )
