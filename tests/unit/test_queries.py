"""storage/sql/*.sql stay readable: one file per storage module, whose header names it and says
why; every query says what it does and is used by the module its file is named after, and every
name a storage module uses is defined. The thread lock key and the finished statuses are written
once (SQL functions of migration 0017)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from storage.queries import QUERIES, load, statement_files

STORAGE = Path(__file__).resolve().parents[2] / "storage"
FILES = statement_files()
TEXT = "\n".join(FILES.values())

#: How storage modules name a query: the first argument of these calls (Database.one/all/run,
#: storage.db.sql, and the helpers that pass a name on: PgToolLedger._close, audit._stream,
#: storage.requests.custom_planned).
NAMING_CALLS = {"one", "all", "run", "sql", "_close", "_stream", "custom_planned"}


def used_names() -> dict[str, list[str]]:
    """Every query name a storage module passes, with where."""
    used: dict[str, list[str]] = {}
    for path in sorted(STORAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called not in NAMING_CALLS:
                continue
            # The first string argument (audit._stream takes the connection first).
            named = next(
                (
                    a.value
                    for a in node.args
                    if isinstance(a, ast.Constant) and isinstance(a.value, str)
                ),
                None,
            )
            if named is not None and re.fullmatch(r"[a-z_]+", named):
                used.setdefault(named, []).append(f"{path.name}:{node.lineno}")
    return used


def test_every_query_has_a_description() -> None:
    lines = TEXT.splitlines()
    undescribed = [
        match.group(1)
        for i, line in enumerate(lines)
        if (match := re.match(r"-- name: (\w+)\s*$", line))
        and not (i + 1 < len(lines) and re.match(r"-- \S", lines[i + 1]))
    ]
    assert undescribed == [], f"queries without a description line: {undescribed}"


def test_each_file_is_one_storage_modules_and_its_header_says_so_and_why() -> None:
    assert len(FILES) >= 10
    for name, text in FILES.items():
        module = f"storage/{name.removesuffix('.sql')}.py"
        assert (STORAGE.parent / module).is_file(), f"{name} names no storage module"
        header = text.split("-- name: ", 1)[0]
        assert header.startswith(f"-- The statements of {module}: "), name
        assert "One file per storage module" in header, f"{name}'s header does not say why"


def test_every_query_is_used_by_the_module_its_file_is_named_after() -> None:
    used = used_names()
    elsewhere = {
        query: name
        for name, text in FILES.items()
        for query in load(text)
        if not any(w.startswith(name.replace(".sql", ".py:")) for w in used.get(query, []))
    }
    assert elsewhere == {}, f"queries their file's module does not run: {elsewhere}"


def test_every_name_used_exists_and_every_query_is_used() -> None:
    used = used_names()
    assert len(used) > 40  # the scan finds the storage modules' calls
    missing = {name: where for name, where in used.items() if name not in QUERIES}
    assert missing == {}, f"names used but defined in no statement file: {missing}"
    unused = sorted(set(QUERIES) - set(used))
    assert unused == [], f"queries no storage module uses: {unused}"


def test_a_query_defined_twice_is_refused() -> None:
    twice = "-- name: a\n-- One.\nSELECT 1;\n\n-- name: a\n-- Two.\nSELECT 2;\n"
    with pytest.raises(RuntimeError, match="'a' is defined twice"):
        load(twice)


def test_the_thread_lock_key_and_the_finished_statuses_are_written_once() -> None:
    # Each lives in a SQL function (migration 0017); the queries call it.
    assert "7277" not in TEXT
    assert "hashtextextended" not in TEXT
    assert TEXT.count("approvals_thread_lock_key_v1(") >= 7
    assert "'completed', 'blocked'" not in TEXT
    assert TEXT.count("approvals_run_finished_v1(") >= 4
