"""The scalar values a policy file names: policy and rule names, enum members, interception points.

Each reader refuses a bad value with ``FILE:LINE: reason`` through the :class:`Reader`.
"""

from __future__ import annotations

import re
from typing import TypeVar

from agent_hooks import InterceptionPoint
from yaml.nodes import Node

from approvals.model import OnExpiry
from approvals.policy.rules import Action, DefaultAction
from approvals.policy.source import Fields, Reader

E = TypeVar("E", Action, DefaultAction, OnExpiry)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_POINTS = {p.value: p for p in InterceptionPoint}


def read_points(
    reader: Reader, node: Node, what: str, *, single: bool = True
) -> list[InterceptionPoint]:
    values = reader.strings(node, what, single=single)
    if not values:
        raise reader.error(node, f"{what}: name at least one interception point")
    out = []
    for value, item in values:
        point = _POINTS.get(value)
        if point is None:
            raise reader.error(
                item, f"{what}: unknown point {value!r} (points: {', '.join(_POINTS)})"
            )
        out.append(point)
    return out


def read_enum(reader: Reader, node: Node, what: str, kind: type[E]) -> E:
    value = reader.string(node, what)
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(m.value for m in kind)
        raise reader.error(node, f"{what}: unknown value {value!r} (allowed: {allowed})") from None


def read_name(reader: Reader, node: Node, what: str) -> str:
    value = reader.string(node, what)
    if not _NAME.fullmatch(value):
        raise reader.error(
            node,
            f"{what}: {value!r} is not a valid name (letters, digits, '_', '.', '-'; "
            "starting with a letter or digit)",
        )
    return value


def read_optional_string(
    reader: Reader, fields: Fields, name: str, what: str = "policy"
) -> str | None:
    node = fields.get(name)
    return None if node is None else reader.string(node, f"{what}: {name}")
