"""Loads the named statements of ``sql/*.sql`` into one dict: every statement the engine runs.

One file per storage module, beside it: ``storage/X.py`` runs what ``sql/X.sql`` names (the
OpenAI host's store, ``openai_runs.py``, included), so a reader of a repository opens one short
file. The names are one namespace all the same: ``storage.db.sql(name)`` finds a statement
whatever file it is in, and a name defined twice, in one file or two, is refused. ``schema.sql``
beside them is no statement file: it is the schema the migrations produce (``storage.schema``).

In each file, every statement follows a ``-- name: x`` header and the comment lines that say what
it does; ``-- ==== ... ====`` banners group a file that holds more than one concern. Comment lines
are not sent. The SQL functions the statements call (``approvals_..._v1``) are defined by the
migrations. Writes that belong together are one statement (data-modifying CTEs): one statement
is one transaction in autocommit mode, so each is atomic, and the audit entry of a change is
written by the statement that makes the change.
"""

from __future__ import annotations

import re
from importlib import resources

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)

#: The file in ``sql/`` that holds no statements: the schema snapshot (``storage.schema``).
SCHEMA_SNAPSHOT = "schema.sql"


def load(
    text: str, *, into: dict[str, str] | None = None, source: str = "the statement files"
) -> dict[str, str]:
    """The named statements of a statement file's ``text`` (added to ``into``, when given); a
    name defined twice is refused (``source``: where, for the error)."""
    parts = _HEADER.split(text)
    queries: dict[str, str] = {} if into is None else into
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        statement = "\n".join(
            line for line in body.strip().splitlines() if not line.lstrip().startswith("--")
        ).rstrip(";\n ")
        if name in queries:
            raise RuntimeError(f"query {name!r} is defined twice ({source})")
        queries[name] = statement
    return queries


def statement_files() -> dict[str, str]:
    """The text of every statement file in ``sql/``, by file name, in name order."""
    folder = resources.files("storage").joinpath("sql")
    return {
        entry.name: entry.read_text(encoding="utf-8")
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".sql") and entry.name != SCHEMA_SNAPSHOT
    }


def load_all() -> dict[str, str]:
    """Every statement file's named statements, in one dict."""
    queries: dict[str, str] = {}
    for name, text in statement_files().items():
        load(text, into=queries, source=f"the second time in {name}")
    return queries


QUERIES: dict[str, str] = load_all()
