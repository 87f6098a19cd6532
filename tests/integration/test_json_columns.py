"""The pool reads json and jsonb columns with orjson (``storage.db.json_loads``) and must read
every value exactly as ``json.loads`` does: an inbox page's shown copy feeds its digest check,
so a number read as another type would show an intact request as tampered."""

from __future__ import annotations

import json

import pytest

from storage.db import json_loads
from web.engine import Engine

#: Values PostgreSQL stores in a jsonb column, among them what orjson reads differently
#: (integers beyond 64 bits become floats) or refuses (a number beyond a double's range).
VALUES = [
    '{"a": 1, "b": [1.5, -0.0, 1e-7, 12345678901234567], "c": "é\\n\\"", "d": null}',
    '{"big": 18446744073709551616}',
    '{"big": -123456789012345678901234567890, "then": 1}',
    "[9223372036854775807, -9223372036854775808, 9007199254740993]",
    '{"huge": 1e400}',
    '{"long fraction": 0.1000000000000000055511151231257827}',
    '{"emoji": "\\ud83d\\ude00", "deep": [[[[[[[[[[{"k": true}]]]]]]]]]]}',
    '"a string"',
    "120.00",
]


@pytest.mark.parametrize("kind", ["jsonb", "json"])
async def test_the_pool_reads_json_as_the_standard_library_does(engine: Engine, kind: str) -> None:
    async with engine.connection() as conn:
        for text in VALUES:
            row = await (
                await conn.execute(f"SELECT %s::{kind} AS v, %s::{kind}::text AS t", (text, text))
            ).fetchone()
            assert row is not None
            expected = json.loads(row["t"])
            assert row["v"] == expected
            assert json.dumps(row["v"]) == json.dumps(expected), text  # 1 and 1.0 differ here


def test_text_orjson_refuses_goes_to_the_standard_library() -> None:
    # A lone surrogate: orjson refuses it, json reads it.
    assert json_loads(b'"\\ud800"') == "\ud800"
    assert type(json_loads(b"[18446744073709551616]")[0]) is int
    assert json_loads(b"1E400") == float("inf")
