"""The one change make compat makes to a peer's test module: its import of the peer's class."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence


class SwapError(ValueError):
    """The test module cannot be swapped safely (the peer's suite changed shape)."""


def swap_import(source: str, *, module: str, name: str, replacement: str) -> str:
    """``source`` with every ``from module import name`` turned into an import of
    ``replacement`` (``package.module.Class``) bound to the same local name; the other names of
    those statements, and every other line, stay as they are.

    Refuses a source that has no such import, or that also reaches the class through a dotted
    path (``mocker.patch("module.Name")``), which the swap could not redirect."""
    tree = ast.parse(source)
    statements = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.level == 0
        and node.module == module
        and any(alias.name == name for alias in node.names)
    ]
    if not statements:
        raise SwapError(f"no `from {module} import {name}` to swap")
    dotted = re.search(rf"[\w.]+\.{re.escape(name)}\b", source)
    if dotted:
        raise SwapError(f"{dotted.group()} reaches {name} past the import the swap rewrites")
    new_module, _, new_name = replacement.rpartition(".")
    lines = source.splitlines(keepends=True)
    for node in sorted(statements, key=lambda n: n.lineno, reverse=True):
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        indent = lines[first][: node.col_offset]
        if indent.strip() or lines[last][node.end_col_offset or 0 :].strip():
            raise SwapError(f"line {node.lineno}: the import shares its line with other code")
        kept = [alias for alias in node.names if alias.name != name]
        local = next(alias.asname or name for alias in node.names if alias.name == name)
        rewritten = [_import_text(module, kept, indent)] if kept else []
        rewritten.append(f"{indent}from {new_module} import {new_name} as {local}\n")
        lines[first : last + 1] = rewritten
    return "".join(lines)


def _import_text(module: str, aliases: Sequence[ast.alias], indent: str) -> str:
    names = [f"{a.name} as {a.asname}" if a.asname else a.name for a in aliases]
    if len(names) == 1:
        return f"{indent}from {module} import {names[0]}\n"
    body = "".join(f"{indent}    {n},\n" for n in names)
    return f"{indent}from {module} import (\n{body}{indent})\n"
