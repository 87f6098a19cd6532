"""storage/sql/queries.sql stays readable: every query says what it does, sits under a banner,
is used by a storage module, and every name a storage module uses is defined. The thread lock
key and the finished statuses are written once (SQL functions of migration 0017)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from storage.queries import QUERIES, load

STORAGE = Path(__file__).resolve().parents[2] / "storage"
TEXT = (STORAGE / "sql" / "queries.sql").read_text(encoding="utf-8")

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


def test_every_query_sits_under_a_section_banner() -> None:
    banners = re.findall(r"^-- ==== .+ ====$", TEXT, re.MULTILINE)
    assert len(banners) >= 10
    first_query = re.search(r"^-- name: ", TEXT, re.MULTILINE)
    first_banner = re.search(r"^-- ==== ", TEXT, re.MULTILINE)
    assert first_query is not None
    assert first_banner is not None
    assert first_banner.start() < first_query.start()


def test_every_name_used_exists_and_every_query_is_used() -> None:
    used = used_names()
    assert len(used) > 40  # the scan finds the storage modules' calls
    missing = {name: where for name, where in used.items() if name not in QUERIES}
    assert missing == {}, f"names used but not defined in queries.sql: {missing}"
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
