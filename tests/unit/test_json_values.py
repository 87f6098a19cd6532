"""The rules for untrusted JSON values and text (approvals.json_values), without a database."""

from __future__ import annotations

import json
from typing import Any

import pytest

from approvals.errors import InvalidValue
from approvals.json_values import (
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
    check_inputs,
    check_json,
    check_text,
    parse_json,
    text_problem,
)


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("a\x00b", "NUL character (U+0000)"),
        ("a\ud800b", "lone surrogate (U+D800)"),
        ("\udfff", "lone surrogate (U+DFFF)"),
    ],
)
def test_text_postgresql_or_utf8_cannot_hold_is_named(value: str, problem: str) -> None:
    assert problem in (text_problem(value) or "")
    with pytest.raises(InvalidValue) as caught:
        check_text("reason", value)
    assert caught.value.field == "reason"
    assert str(caught.value).startswith("reason contains")


@pytest.mark.parametrize("value", ["", "plain", "émoji 😀 and 中文", "tab\tnew\nline", "\u202e"])
def test_ordinary_text_passes(value: str) -> None:
    assert text_problem(value) is None
    check_text("reason", value)


@pytest.mark.parametrize(
    ("value", "path", "problem"),
    [
        ({"amount": float("nan")}, "args/amount", "is NaN"),
        ({"amount": float("inf")}, "args/amount", "is Infinity"),
        ({"amount": float("-inf")}, "args/amount", "is -Infinity"),
        ({"amount": json.loads("1e400")}, "args/amount", "is Infinity"),
        ({"n": MAX_SAFE_INTEGER + 1}, "args/n", "beyond"),
        ({"n": -(MAX_SAFE_INTEGER + 1)}, "args/n", "beyond"),
        ({"items": [{"name": "ok"}, {"name": "x\x00"}]}, "args/items/1/name", "NUL"),
        ({"k\x00ey": 1}, "args/k\\u0000ey", "is a key that contains a NUL"),
        ({"\ud800": 1}, "args/\\ud800", "is a key that contains a lone surrogate"),
        ({"deep": {"er": ["\udc80"]}}, "args/deep/er/0", "lone surrogate (U+DC80)"),
        ({1: "x"}, "args", "key that is not a string"),
        ({"when": {1, 2}}, "args/when", "is a set, not a JSON value"),
    ],
)
def test_each_problem_is_refused_with_the_path_to_it(value: Any, path: str, problem: str) -> None:
    with pytest.raises(InvalidValue) as caught:
        check_json("args", value)
    assert caught.value.field == path
    assert problem in caught.value.problem


def test_the_first_problem_in_document_order_is_reported() -> None:
    with pytest.raises(InvalidValue) as caught:
        check_json("args", {"a": [1, float("nan")], "b": "\x00"})
    assert caught.value.field == "args/a/1"


def test_nesting_up_to_the_limit_passes_and_beyond_it_is_refused_without_recursion() -> None:
    check_json("args", nested(MAX_DEPTH))
    with pytest.raises(InvalidValue) as caught:
        check_json("args", nested(MAX_DEPTH + 1))
    assert f"nested deeper than {MAX_DEPTH}" in caught.value.problem
    # Far past Python's recursion limit: the walk is iterative, so this is an answer, not a
    # RecursionError.
    with pytest.raises(InvalidValue):
        check_json("args", nested(100_000))


def test_ordinary_json_passes_unchanged() -> None:
    value = {
        "order_id": "1001",
        "amount": 25.5,
        "count": MAX_SAFE_INTEGER,
        "tags": ["a", "b"],
        "flag": True,
        "none": None,
        "nested": {"x": [1, 2, {"y": -0.0}]},
    }
    check_json("args", value)


def test_check_inputs_names_the_keyword_and_skips_none() -> None:
    check_inputs(reason=None, args=None, principal="local:ann")
    with pytest.raises(InvalidValue) as caught:
        check_inputs(reason="fine", args={"a": float("nan")})
    assert caught.value.field == "args/a"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"a": NaN}', "NaN is not a JSON number"),
        ('{"a": -Infinity}', "-Infinity is not a JSON number"),
        ('{"a": "\\u0000"}', "NUL"),
        ('{"a": "\\ud800"}', "lone surrogate"),
        ("[" * 100_000 + "]" * 100_000, "nested deeper"),
        ("{not json", "is not valid JSON"),
    ],
)
def test_typed_json_text_is_parsed_strictly(text: str, problem: str) -> None:
    with pytest.raises(InvalidValue) as caught:
        parse_json("--args", text)
    assert problem in str(caught.value)
    assert str(caught.value).startswith("--args")


def test_typed_json_text_that_is_fine_parses() -> None:
    assert parse_json("--args", '{"amount": 1.5, "to": "ann"}') == {"amount": 1.5, "to": "ann"}
