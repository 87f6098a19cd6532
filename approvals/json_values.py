"""Untrusted JSON values and text: what the engine accepts before anything is stored, hashed
or shown.

Every face (API, pages, CLI) and every engine entry point (``decide``, starting a run) applies
these rules, so a bad value is refused as ``InvalidValue`` naming its field, before anything
is written. Why each rule:

- NUL (U+0000): PostgreSQL's text and jsonb cannot hold it.
- A lone surrogate (U+D800 to U+DFFF without its pair): Python's json decodes ``"\\ud800"``
  into a str that has no UTF-8 form, so it can be neither stored nor hashed.
- NaN and Infinity: not JSON (RFC 8259), although Python's json reads and writes them; the
  content identity (RFC 8785) and jsonb refuse them. ``1e400`` decodes to Infinity too.
- An integer beyond 2^53 - 1: the content identity refuses it (I-JSON, RFC 7493), since a
  JavaScript client would not read it back unchanged.
- A key that is not a string, or a value that is not JSON at all (a Python caller's set or
  datetime): it has no canonical form.
- Nesting deeper than ``MAX_DEPTH``: every walker after this one (the schema validator, the
  encoder, the database) recurses, and a deep enough value exhausts the stack.

The walk here is iterative, so it never recurses itself.
"""

from __future__ import annotations

import json
import math
from typing import Any

from approvals.errors import InvalidValue

#: Containers inside containers; tool arguments never need more.
MAX_DEPTH = 64
MAX_SAFE_INTEGER = 2**53 - 1
_SEGMENT_LENGTH = 60


def text_problem(value: str) -> str | None:
    """What makes ``value`` unacceptable as text, or ``None`` when it is fine."""
    if "\x00" in value:
        return "contains a NUL character (U+0000)"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(value[exc.start])
        return f"contains a lone surrogate (U+{code:04X}), which is not Unicode text"
    return None


def _number_problem(value: int | float) -> str | None:
    if isinstance(value, float):
        if math.isnan(value):
            return "is NaN, which is not a JSON number"
        if math.isinf(value):
            sign = "-" if value < 0 else ""
            return f"is {sign}Infinity, which is not a JSON number"
        return None
    if abs(value) > MAX_SAFE_INTEGER:
        return f"is an integer beyond ±{MAX_SAFE_INTEGER} (2^53 - 1); send it as a string"
    return None


def segment(key: str | int) -> str:
    """A path segment safe to show: control characters and lone surrogates escaped (the key
    itself may be what is wrong), and cut short."""
    if isinstance(key, int):
        return str(key)
    shown = "".join(
        c if c.isprintable() and not 0xD800 <= ord(c) <= 0xDFFF else f"\\u{ord(c):04x}"
        for c in key[:_SEGMENT_LENGTH]
    )
    return shown + ("..." if len(key) > _SEGMENT_LENGTH else "")


def value_problem(value: Any, *, max_depth: int = MAX_DEPTH) -> tuple[list[str], str] | None:
    """The first problem in a JSON value, as (path segments, problem), or ``None``."""
    stack: list[tuple[list[str], Any, int]] = [([], value, 0)]
    while stack:
        path, item, depth = stack.pop()
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, str):
            problem = text_problem(item)
        elif isinstance(item, int | float):
            problem = _number_problem(item)
        elif isinstance(item, dict | list | tuple):
            if depth >= max_depth:
                return path, f"is nested deeper than {max_depth} levels"
            if isinstance(item, dict):
                for key in item:
                    if not isinstance(key, str):
                        return path, f"has a key that is not a string ({type(key).__name__})"
                    key_problem = text_problem(key)
                    if key_problem is not None:
                        return [*path, segment(key)], f"is a key that {key_problem}"
                children = list(item.items())
            else:
                children = list(enumerate(item))
            # Reversed: the first child is checked first, so the first problem is reported.
            for key, child in reversed(children):
                stack.append(([*path, segment(key)], child, depth + 1))
            continue
        else:
            problem = f"is a {type(item).__name__}, not a JSON value"
        if problem is not None:
            return path, problem
    return None


def check_text(field: str, value: str | None) -> None:
    """Raise ``InvalidValue`` when ``value`` is text the engine cannot store."""
    if value is None:
        return
    if not isinstance(value, str):
        raise InvalidValue(field, "must be text")
    problem = text_problem(value)
    if problem is not None:
        raise InvalidValue(field, problem)


def check_json(field: str, value: Any) -> None:
    """Raise ``InvalidValue`` naming the path to the first thing in ``value`` that is not a
    JSON value the engine can store, hash and show."""
    found = value_problem(value)
    if found is not None:
        path, problem = found
        raise InvalidValue("/".join([field, *path]), problem)


def check_inputs(**values: Any) -> None:
    """Check each named value (text or any JSON value; ``None`` is skipped), in order. One
    call at the top of an entry point, before anything is written."""
    for field, value in values.items():
        if value is not None:
            check_json(field, value)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(field: str, text: str) -> Any:
    """A JSON text typed by a person (a CLI option, a form field), parsed strictly: no NaN or
    Infinity, and the value checked like any other. Raises ``InvalidValue``."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise InvalidValue(field, f"is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise InvalidValue(field, f"is not valid JSON: {exc}") from None
    check_json(field, value)
    return value
