"""docs/architecture.md's "Follow one approval" walk stays true: every step names a file that
exists and definitions that the file holds, no file is named twice, and the walk stays short."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
# A step: "1. `path/to/module.py`: `name`, `Class.method` ... what happens there."
STEP = re.compile(r"^\d+\.\s+`(?P<path>[\w/.]+\.(?:py|sql|html))`(?P<rest>.*)$")
NAME = re.compile(r"`([A-Za-z_][\w.]*)`")


def walk() -> list[tuple[str, list[str]]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Follow one approval", 1)[1].split("\n## ", 1)[0]
    steps = []
    for line in section.splitlines():
        m = STEP.match(line.strip())
        if m:
            # Only the names before the first colon-led prose are the step's definitions.
            names = NAME.findall(m.group("rest").split(". ", 1)[0])
            steps.append((m.group("path"), names))
    return steps


def defined(path: Path) -> set[str]:
    """Top-level names, and ``Class.method`` for methods, that ``path`` defines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
            if isinstance(node, ast.ClassDef):
                for sub in node.body:
                    if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                        out.add(f"{node.name}.{sub.name}")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update(t.id for t in targets if isinstance(t, ast.Name))
    return out


def sql_names(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    return set(re.findall(r"--\s*name:\s*(\w+)", text)) | set(
        re.findall(r"FUNCTION\s+(\w+)", text, flags=re.I)
    )


def test_the_walk_names_at_most_25_files_each_once() -> None:
    steps = walk()
    paths = [p for p, _ in steps]
    assert 10 <= len(paths) <= 25, paths
    assert len(set(paths)) == len(paths), [p for p in paths if paths.count(p) > 1]


def test_every_named_module_and_definition_exists() -> None:
    missing = []
    for rel, names in walk():
        path = ROOT / rel
        if not path.is_file():
            missing.append(rel)
            continue
        if path.suffix == ".html":
            continue
        have = defined(path) if path.suffix == ".py" else sql_names(path)
        missing += [f"{rel}: {n}" for n in names if n not in have]
    assert not missing, missing
