"""A transform rule's change: ``mask`` (a regular expression and its replacement) or ``set``
(a tool argument's key path and the value it gets), each checked before it can be applied."""

from __future__ import annotations

import re

from agent_hooks.path import PathError
from agent_hooks.path import parse as parse_target_path
from yaml.nodes import Node

from approvals.policy.rules import Mask, SetArgument
from approvals.policy.source import Reader

TRANSFORM_FIELDS = ("mask", "set")
MASK_FIELDS = ("pattern", "replacement")
SET_FIELDS = ("path", "value")
DEFAULT_MASK = "[redacted]"

_PATH_PART = re.compile(r"([A-Za-z0-9_-]+)((?:\[\d+\])*)")


def read_mask(reader: Reader, node: Node, what: str) -> Mask:
    fields = reader.fields(node, f"{what}: mask", MASK_FIELDS).require("pattern")
    pattern_node = fields.value("pattern")
    text = reader.string(pattern_node, f"{what}: mask.pattern")
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise reader.error(
            pattern_node, f"{what}: mask.pattern is not a valid regular expression: {exc}"
        ) from None
    if pattern.search("") is not None:
        raise reader.error(pattern_node, f"{what}: mask.pattern matches the empty string")
    replacement = DEFAULT_MASK
    if "replacement" in fields:
        replacement = reader.string(
            fields.value("replacement"), f"{what}: mask.replacement", empty=True
        )
        try:
            # Compiling the template happens on the first substitution: do one now.
            pattern.sub(replacement, "")
        except (re.error, IndexError) as exc:
            raise reader.error(
                fields.value("replacement"), f"{what}: mask.replacement is invalid: {exc}"
            ) from None
    return Mask(pattern=pattern, replacement=replacement)


def read_set(reader: Reader, node: Node, what: str) -> SetArgument:
    fields = reader.fields(node, f"{what}: set", SET_FIELDS).require("path", "value")
    path_node = fields.value("path")
    text = reader.string(path_node, f"{what}: set.path")
    segments: list[str | int] = []
    for part in text.split("."):
        match = _PATH_PART.fullmatch(part)
        if match is None:
            raise reader.error(
                path_node,
                f"{what}: set.path {text!r} is not a key path such as currency, "
                "address.country or items[0].sku (keys: letters, digits, _ and -)",
            )
        segments.append(match.group(1))
        segments.extend(int(i) for i in re.findall(r"\[(\d+)\]", match.group(2)))
    change = SetArgument(path=tuple(segments), value=reader.data(fields.value("value"), what))
    try:
        parse_target_path(change.target_path)
    except PathError as exc:  # the grammar above is a subset; this guards against drift
        raise reader.error(path_node, f"{what}: set.path is invalid: {exc}") from None
    return change
