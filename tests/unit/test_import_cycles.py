"""No import cycles inside the engine's four packages (function-local and TYPE_CHECKING imports
count): the layers contract in pyproject.toml orders graphs/' concerns, this keeps every package's
modules acyclic, which a layers contract cannot say about modules of one layer."""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest


def cycles(package: str) -> list[list[str]]:
    graph = grimp.build_graph(package, cache_dir=None)
    modules = sorted(graph.modules)
    edges = {
        m: sorted(i for i in graph.find_modules_directly_imported_by(m) if i.startswith(package))
        for m in modules
    }
    # Tarjan's strongly connected components, iteratively; a component of two or more is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges.get(child, []))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@pytest.mark.parametrize("package", ["approvals", "graphs", "storage", "web"])
def test_no_import_cycles(package: str) -> None:
    assert cycles(package) == []


def test_the_check_finds_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "cyclic_pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "a.py").write_text("from cyclic_pkg import b\n")
    (root / "b.py").write_text("def f() -> None:\n    from cyclic_pkg import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cycles("cyclic_pkg") == [["cyclic_pkg.a", "cyclic_pkg.b"]]
