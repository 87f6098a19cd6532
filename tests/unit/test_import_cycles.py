"""No import cycles inside the engine's four packages (function-local and TYPE_CHECKING imports
count): the layers contract in pyproject.toml orders graphs/' concerns, this keeps every package's
modules acyclic, which a layers contract cannot say about modules of one layer."""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest


def cycles(package: str) -> list[tuple[str, str]]:
    """The imports inside ``package`` that lie on a cycle: ``importer`` imports ``imported``
    directly, and a chain of imports leads from ``imported`` back to ``importer``."""
    graph = grimp.build_graph(package, cache_dir=None)
    return sorted(
        (importer, imported)
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if imported.split(".")[0] == package
        and graph.chain_exists(importer=imported, imported=importer)
    )


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
    assert cycles("cyclic_pkg") == [
        ("cyclic_pkg.a", "cyclic_pkg.b"),
        ("cyclic_pkg.b", "cyclic_pkg.a"),
    ]
