"""Reading policy and cases files: YAML nodes with their line numbers, strict field checks.

Every refusal is a :class:`PolicyError` whose message is ``FILE:LINE: reason``, so an operator
can jump to the line. The YAML is composed (not loaded) to keep the position of every key and
value; values are then checked field by field against what the file format allows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from approvals.errors import ApprovalsError
from approvals.model import MAX_EXPIRES_IN

_DURATION = re.compile(r"(\d+)([smhd])")
_DURATION_FULL = re.compile(r"(?:\d+[smhd])+")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class PolicyError(ApprovalsError):
    """A policy or cases file that cannot be used; the message is ``FILE:LINE: reason``."""

    def __init__(self, source: str, line: int | None, reason: str) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {reason}")


def line_of(node: Node) -> int:
    """The 1-based line a node starts on."""
    return int(node.start_mark.line) + 1


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _node_kind(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    return "a scalar"


class Fields:
    """The keys of one YAML mapping, checked against the fields it may have."""

    def __init__(self, reader: Reader, node: MappingNode, what: str) -> None:
        self.reader = reader
        self.node = node
        self.what = what
        self._values: dict[str, Node] = {}
        self._keys: dict[str, Node] = {}
        for key_node, value_node in node.value:
            key = reader.scalar(key_node)
            if not isinstance(key, str):
                raise reader.error(key_node, f"{what}: field names must be strings, got {key!r}")
            if key in self._values:
                raise reader.error(key_node, f"{what}: duplicate field {key!r}")
            self._keys[key] = key_node
            self._values[key] = value_node

    def allow_only(self, allowed: Iterable[str]) -> Fields:
        """Refuse any field not in ``allowed``, naming it and listing the allowed ones."""
        names = list(allowed)
        for key, key_node in self._keys.items():
            if key not in names:
                raise self.reader.error(
                    key_node,
                    f"{self.what}: unknown field {key!r} (allowed: {', '.join(names)})",
                )
        return self

    def require(self, *names: str) -> Fields:
        for name in names:
            if name not in self._values:
                raise self.reader.error(self.node, f"{self.what}: missing field {name!r}")
        return self

    def __contains__(self, name: str) -> bool:
        return name in self._values

    def names(self) -> list[str]:
        return list(self._values)

    def get(self, name: str) -> Node | None:
        return self._values.get(name)

    def key(self, name: str) -> Node:
        return self._keys[name]

    def value(self, name: str) -> Node:
        return self._values[name]


class Reader:
    """Typed access to the nodes of one file, raising :class:`PolicyError` with its name."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._constructor = SafeConstructor()

    def error(self, node: Node | int | None, reason: str) -> PolicyError:
        line = line_of(node) if isinstance(node, Node) else node
        return PolicyError(self.source, line, reason)

    def compose(self, text: str) -> MappingNode:
        """The document's top-level mapping; YAML syntax errors carry the line of the problem."""
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = int(mark.line) + 1 if mark is not None else None
            problem = exc.problem or exc.context or "invalid YAML"
            raise PolicyError(self.source, line, f"invalid YAML: {problem}") from None
        except yaml.YAMLError as exc:
            raise PolicyError(self.source, None, f"invalid YAML: {exc}") from None
        if root is None:
            raise PolicyError(self.source, 1, "the file is empty")
        if not isinstance(root, MappingNode):
            raise self.error(root, f"expected a mapping at the top level, got {_node_kind(root)}")
        return root

    def fields(self, node: Node, what: str, allowed: Iterable[str]) -> Fields:
        """A mapping that may hold only the ``allowed`` fields."""
        return self.mapping(node, what).allow_only(allowed)

    def mapping(self, node: Node, what: str) -> Fields:
        """A mapping with any (string) keys."""
        if not isinstance(node, MappingNode):
            raise self.error(node, f"{what}: expected a mapping, got {_node_kind(node)}")
        return Fields(self, node, what)

    def scalar(self, node: Node) -> Any:
        if not isinstance(node, ScalarNode):
            return None
        try:
            return self._constructor.construct_object(node, deep=True)
        except ConstructorError as exc:
            raise self.error(node, f"invalid value: {exc.problem}") from None

    def data(self, node: Node, what: str) -> Any:
        """Any JSON-compatible value: mappings with string keys, lists, strings, finite numbers,
        booleans and null. Dates, binary and sets are refused (they do not cross the wire)."""
        if isinstance(node, MappingNode):
            fields = Fields(self, node, what)
            return {name: self.data(fields.value(name), what) for name in fields.names()}
        if isinstance(node, SequenceNode):
            return [self.data(item, what) for item in node.value]
        value = self.scalar(node)
        if value is None or isinstance(value, str | bool | int):
            return value
        if isinstance(value, float) and math.isfinite(value):
            return value
        raise self.error(node, f"{what}: {value!r} is not a JSON value (quote it)")

    def string(self, node: Node, what: str, *, empty: bool = False) -> str:
        value = self.scalar(node) if isinstance(node, ScalarNode) else node
        if not isinstance(value, str):
            got = _kind(value) if isinstance(node, ScalarNode) else _node_kind(node)
            raise self.error(node, f"{what}: expected a string, got {got}")
        if not empty and not value.strip():
            raise self.error(node, f"{what}: must not be empty")
        return value

    def integer(self, node: Node, what: str) -> int:
        value = self.scalar(node)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(node, f"{what}: expected an integer, got {self._got(node, value)}")
        return value

    def boolean(self, node: Node, what: str) -> bool:
        value = self.scalar(node)
        if not isinstance(value, bool):
            raise self.error(node, f"{what}: expected true or false, got {self._got(node, value)}")
        return value

    def strings(self, node: Node, what: str, *, single: bool = False) -> list[tuple[str, Node]]:
        """A list of non-empty strings (or, with ``single``, one string standing for a list of
        one), each with its node; duplicates are refused."""
        if single and isinstance(node, ScalarNode):
            return [(self.string(node, what), node)]
        if not isinstance(node, SequenceNode):
            raise self.error(node, f"{what}: expected a list of strings, got {_node_kind(node)}")
        out: list[tuple[str, Node]] = []
        for item in node.value:
            value = self.string(item, what)
            if any(value == seen for seen, _ in out):
                raise self.error(item, f"{what}: {value!r} is listed twice")
            out.append((value, item))
        return out

    def duration(self, node: Node, what: str) -> timedelta:
        """A duration such as ``30m``, ``2h``, ``1d`` or ``1h30m`` (units s, m, h, d)."""
        value = self.scalar(node)
        if not isinstance(value, str) or not _DURATION_FULL.fullmatch(value.strip()):
            raise self.error(
                node,
                f"{what}: expected a duration such as 30m, 2h or 1d (units s, m, h, d), "
                f"got {value!r}",
            )
        seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in _DURATION.findall(value))
        if seconds <= 0:
            raise self.error(node, f"{what}: a duration must be longer than zero")
        if seconds > MAX_EXPIRES_IN.total_seconds():
            raise self.error(
                node, f"{what}: a duration must be at most {format_duration(MAX_EXPIRES_IN)}"
            )
        return timedelta(seconds=seconds)

    def _got(self, node: Node, value: Any) -> str:
        return _kind(value) if isinstance(node, ScalarNode) else _node_kind(node)


def format_duration(value: timedelta) -> str:
    """The shortest ``1d2h30m`` spelling of a duration, as a policy file writes it."""
    seconds = int(value.total_seconds())
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts) or "0s"
