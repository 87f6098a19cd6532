"""The pool reads json and jsonb columns with orjson (``storage.db.json_loads``) and must read
every value exactly as ``json.loads`` does: an inbox page's shown copy feeds its digest check,
so a number read as another type would show an intact request as tampered. It writes jsonb
parameters with orjson too (``storage.db.json_dumps``), and must store every value as
``json.dumps``'s text stores it, and refuse what that text made the server (or ``json.dumps``)
refuse."""

from __future__ import annotations

import enum
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from storage.db import json_dumps, json_loads
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


class _Level(enum.IntEnum):
    HIGH = 2


class _Name(str):
    pass


class _Plain(enum.Enum):
    A = "a"


#: Plain JSON data, which orjson writes: numbers where its text differs from ``json.dumps``'s
#: (1e-05 as 0.00001, 2.5e-07 as 2.5e-7), the extremes of a double and of 64 bits, text that
#: ``json.dumps`` escapes and orjson writes as UTF-8 (accents, an emoji, U+2028), control
#: characters, and nesting.
PLAIN: list[Any] = [
    {"amount": 25.0, "tiny": [1e-05, 2.5e-07, 5e-324, -0.0, 0.1], "big": [1e16, 1e22, 1.7e308]},
    [9223372036854775807, -9223372036854775808, 18446744073709551615, 9007199254740993, 0],
    {"text": 'é \u2028 \U0001f600 / \x7f \x01\x1f \n\t"\\', "": None, "t": True},
    {"deep": [[[[[[[[[[{"k": False}]]]]]]]]]], "empty": {}, "list": []},
    "a string",
    120.5,
]


@pytest.mark.parametrize("value", PLAIN, ids=range(len(PLAIN)))
async def test_the_pool_stores_jsonb_parameters_as_the_standard_library_does(
    engine: Engine, value: Any
) -> None:
    assert isinstance(json_dumps(value), bytes)  # orjson wrote it
    async with engine.connection() as conn:
        row = await (
            await conn.execute(
                "SELECT %s::text AS ours, %s::jsonb::text AS stdlib",
                (Jsonb(value), json.dumps(value)),
            )
        ).fetchone()
    assert row is not None
    assert row["ours"] == row["stdlib"]


#: What orjson writes differently from ``json.dumps``, or refuses: each gets ``json.dumps``'s
#: own text (an IntEnum orjson writes as its value, as ``json.dumps`` does).
NOT_PLAIN: list[Any] = [
    {"x": float("nan")},
    [float("inf"), float("-inf")],
    (1, 2),
    {1: "a", None: "b"},
    [2**70],
    {"s": "\ud800"},
    [_Level.HIGH],
    {"name": _Name("x")},
]


@pytest.mark.parametrize("value", NOT_PLAIN, ids=range(len(NOT_PLAIN)))
def test_what_orjson_writes_otherwise_gets_the_standard_librarys_text(value: Any) -> None:
    text = json_dumps(value)
    assert (text.decode() if isinstance(text, bytes) else text) == json.dumps(value)


@pytest.mark.parametrize("value", [uuid.uuid4(), datetime.now(UTC), {"e": _Plain.A}])
def test_what_the_standard_library_refuses_is_refused(value: Any) -> None:
    with pytest.raises(TypeError):
        json.dumps(value)
    with pytest.raises(TypeError):
        json_dumps(value)


async def test_nan_is_refused_by_the_server_as_before(engine: Engine) -> None:
    async with engine.connection() as conn:
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            await conn.execute("SELECT %s::text", (Jsonb({"x": float("nan")}),))
