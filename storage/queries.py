"""Loads ``sql/queries.sql`` into a dict: every statement the engine runs, in one file."""

from __future__ import annotations

import re
from importlib import resources

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def _load() -> dict[str, str]:
    text = resources.files("storage").joinpath("sql/queries.sql").read_text(encoding="utf-8")
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


QUERIES: dict[str, str] = _load()
