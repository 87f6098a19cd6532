"""Loads ``sql/queries.sql`` into a dict: every statement the engine runs, in one file.

Each statement follows a ``-- name: x`` header and the comment lines that say what it does;
``-- ==== ... ====`` banners between them group the file. Comment lines are not sent.
"""

from __future__ import annotations

import re
from importlib import resources

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def load(text: str) -> dict[str, str]:
    """The named statements of a queries file's ``text``; a name defined twice is refused."""
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        statement = "\n".join(
            line for line in body.strip().splitlines() if not line.lstrip().startswith("--")
        ).rstrip(";\n ")
        if name in queries:
            raise RuntimeError(f"query {name!r} is defined twice in queries.sql")
        queries[name] = statement
    return queries


QUERIES: dict[str, str] = load(
    resources.files("storage").joinpath("sql/queries.sql").read_text(encoding="utf-8")
)
