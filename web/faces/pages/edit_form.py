"""The edit form of the request page: its fields, from the tool's JSON schema; what the
approver typed back, as arguments typed by that schema; the confirmation's diff of proposed
against edited arguments.

A value that holds characters a text field would hide or reorder (bidi overrides, zero-width
characters, controls) is never shown raw: the field shows it escaped, as JSON text, and posts
it back as such.
"""

from __future__ import annotations

import copy
import json
import unicodedata
from typing import Any

from approvals.errors import InvalidValue
from approvals.json_values import check_json, parse_json

#: Unicode categories of characters that show as nothing or change how what follows is shown:
#: controls, format characters (bidi overrides, zero-width joiners and spaces), surrogates,
#: private-use and unassigned code points, line and paragraph separators.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _hidden(ch: str) -> bool:
    category = unicodedata.category(ch)
    return category in _HIDDEN_CATEGORIES or (category == "Zs" and ch != " ")


def hides_characters(text: str) -> bool:
    """Whether ``text`` holds characters a text field would show as nothing, or that would
    reorder what the approver reads (``U+202E`` shows "fdp.exe" for "exe.pdf")."""
    return any(_hidden(ch) for ch in text)


def escape_hidden(text: str) -> str:
    """``text`` with each hidden character written as its ``\\uXXXX`` escape."""
    return "".join(
        # json.dumps writes one past U+FFFF as its surrogate pair, which JSON text can hold.
        json.dumps(ch)[1:-1] if _hidden(ch) else ch
        for ch in text
    )


def edit_fields(
    schema: dict[str, Any], values: dict[str, Any], escaped_as_typed: frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    """The edit form's fields, from the tool's JSON schema (top-level properties).

    A value holding hidden characters is shown escaped, as the detail page shows it (JSON
    text, ``"\\u202e..."``), never raw: a text field would show it as nothing or reordered.
    Such a string field is ``escaped`` and posts back JSON text (``enc.NAME=json``).
    ``escaped_as_typed``: string fields whose escaped text did not parse, shown as typed."""
    required = set(schema.get("required") or [])
    fields = []
    for name, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type", "string")
        value = values.get(name, prop.get("default"))
        escaped = False
        if name in escaped_as_typed and isinstance(value, str):
            value, escaped = escape_hidden(value), True
        elif isinstance(value, str) and hides_characters(value):
            value, escaped = json.dumps(value), True
        fields.append(
            {
                "name": name,
                "type": kind if kind in ("string", "number", "integer", "boolean") else "json",
                "title": prop.get("title") or name,
                "description": prop.get("description"),
                "required": name in required,
                "value": value,
                "escaped": escaped,
                "has_default": "default" in prop,
                "default": prop.get("default"),
                "pattern": prop.get("pattern"),
                "minimum": prop.get("minimum", prop.get("exclusiveMinimum")),
                "maximum": prop.get("maximum", prop.get("exclusiveMaximum")),
                "max_length": prop.get("maxLength"),
            }
        )
    return fields


def parse_edit(
    schema: dict[str, Any], form: dict[str, str]
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """Edited arguments from the form, typed by the schema; errors per field.

    A field the approver cleared takes the schema's default, so that what the confirmation
    shows is what runs; an optional field without a default, or one the form did not send
    at all, is left out (the tool's own default applies, and the confirmation says so)."""
    args: dict[str, Any] = {}
    errors: list[dict[str, str]] = []
    for field in edit_fields(schema, {}):
        name, kind = field["name"], field["type"]
        raw = form.get(f"arg.{name}")
        if kind == "boolean":
            args[name] = raw == "on"
            continue
        if raw is None or raw == "":
            if field["required"]:
                errors.append({"path": name, "message": "is required"})
            elif raw == "" and field["has_default"]:
                args[name] = copy.deepcopy(field["default"])
            continue
        try:
            if kind == "string" and form.get(f"enc.{name}") == "json":
                args[name] = _escaped_text(raw)
            elif kind == "integer":
                args[name] = int(raw)
            elif kind == "number":
                args[name] = float(raw)
            elif kind == "json":
                args[name] = parse_json(name, raw)
            else:
                args[name] = raw
            # float() reads "nan" and "inf", and any text may hold a NUL: the API's rules.
            check_json(name, args[name])
        except InvalidValue as exc:
            args.pop(name, None)
            errors.append({"path": name, "message": exc.problem})
        except _NotEscapedText:
            errors.append(
                {
                    "path": name,
                    "message": "is not escaped text: keep it in double quotes, with \\uXXXX for"
                    " each hidden character",
                }
            )
        except ValueError:
            errors.append({"path": name, "message": f"is not a valid {kind}"})
    return args, errors


class _NotEscapedText(Exception):
    pass


def _escaped_text(raw: str) -> str:
    """An escaped string field's text (a JSON string) as the string it stands for."""
    if not raw.strip().startswith('"'):
        raise _NotEscapedText  # not a string: whatever else it is, however deeply nested
    try:
        value = json.loads(raw)
    except ValueError:
        raise _NotEscapedText from None
    if not isinstance(value, str):
        raise _NotEscapedText
    return value


def typed(schema: dict[str, Any], form: dict[str, str], parsed: dict[str, Any]) -> dict[str, Any]:
    """The values to show back in the edit form: parsed ones, else the raw text typed."""
    values: dict[str, Any] = {}
    for name in schema.get("properties") or {}:
        if name in parsed:
            values[name] = parsed[name]
        elif f"arg.{name}" in form:
            values[name] = form[f"arg.{name}"]
    return values


def diff(
    proposed: dict[str, Any], edited: dict[str, Any], defaulted: frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    """The confirmation's rows: each argument as proposed and as it will run. An argument
    left out is "not given" (never shown as null, which it is not), and one that a cleared
    field set to the schema's default says so."""
    keys = list(dict.fromkeys([*proposed, *edited]))
    return [
        {
            "name": k,
            "proposed": proposed.get(k),
            "edited": edited.get(k),
            "proposed_given": k in proposed,
            "edited_given": k in edited,
            "defaulted": k in defaulted,
            "changed": (k in proposed) != (k in edited) or proposed.get(k) != edited.get(k),
        }
        for k in keys
    ]
