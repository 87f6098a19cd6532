"""Masking withheld values wherever else an approver would read them.

A policy's ``redact`` hides an argument's value at its own path (:mod:`approvals.redaction`).
The same value can come back in free text: a tool's result that repeats the card number it
was given, the model's answer quoting that result, another call's arguments. A request made
later in the run shows such text to its approvers, so every request's shown copy is masked
with the run's withheld values (:data:`approvals.redaction.MARKER` in their place) before it is
recorded.

Which values are masked, and how:

- A string value of at least :data:`MIN_MASKED_LENGTH` (4) characters is masked wherever it
  occurs, also as JSON writes it inside a string (a tool result the model was handed as JSON
  text).
- One of exactly :data:`SHORT_MASKED_LENGTH` (3) characters, such as a card's security code, is
  masked only where it stands alone (no letter or digit either side): masked everywhere,
  ``737`` would wreck ``1737`` and every id that happens to hold it.
- Shorter values are never masked in free text: ``1`` or ``42`` would wreck the text and the
  masking would tell what the value is anyway. They stay hidden at their own path.
- A number counts as the text JSON writes for it (``4111111111111111``, ``42.5``); true, false
  and null are never masked; a mapping or list (a path redacted whole) counts as its values.

Masking is for what people are shown. The model is not masked: it proposed the value itself,
the tool legitimately used it, and the run's state holds it anyway.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from approvals.redaction import MARKER, SHOWN_KEY

#: A withheld value this long or longer is masked wherever it occurs in free text.
MIN_MASKED_LENGTH = 4
#: A withheld value of exactly this length is masked only where it stands alone.
SHORT_MASKED_LENGTH = 3

_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _texts(value: Any) -> Iterator[str]:
    """The texts a withheld value is written as in free text."""
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        if value != MARKER:
            yield value
    elif isinstance(value, int | float):
        yield json.dumps(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _texts(item)


def _forms(text: str) -> set[str]:
    """``text`` as it is, and as JSON writes it inside a string (escaped, ASCII or not)."""
    return {text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}


class Withheld:
    """The values a run withholds from approvers, ready to mask free text with."""

    def __init__(self, values: Iterable[Any] = ()) -> None:
        long: set[str] = set()
        short: set[str] = set()
        for text in _texts(list(values)):
            for form in _forms(text):
                if len(form) >= MIN_MASKED_LENGTH:
                    long.add(form)
                elif len(form) == SHORT_MASKED_LENGTH:
                    short.add(form)
        # Longest first, so a value inside another is not masked first, leaving part of it.
        alternatives = [re.escape(t) for t in sorted(long, key=lambda t: (-len(t), t))]
        if short:
            alone = "|".join(re.escape(t) for t in sorted(short))
            alternatives.append(rf"(?<![^\W_])(?:{alone})(?![^\W_])")
        self._pattern = re.compile("|".join(alternatives)) if alternatives else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, text: str) -> str:
        """``text`` with every withheld value in it replaced by the marker."""
        if self._pattern is None:
            return text
        return self._pattern.sub(MARKER, text)

    def value(self, value: Any) -> Any:
        """A JSON value with every withheld value in its strings (keys too) masked, and a
        number that is (or holds) one replaced by the marker."""
        if self._pattern is None or value is None or isinstance(value, bool):
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, int | float):
            written = json.dumps(value)
            return MARKER if self.text(written) != written else value
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(item) for item in value]
        return value


def _masked_args(args: dict[str, Any], withheld: Withheld) -> tuple[dict[str, Any], list[str]]:
    """``args`` masked, and the paths (dotted keys) of the arguments masking changed: listed
    as redacted, they cannot be edited and run with their original values, as a redacted
    argument does. A changed value under a key that is not a path segment is listed as the
    mapping that holds it (a top-level one cannot be listed: it stays masked, and an edit of
    it runs with the masked text, never the value)."""
    listed: list[str] = []

    def walk(node: dict[str, Any], prefix: tuple[str, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in node.items():
            if not _KEY.fullmatch(key):
                masked = withheld.value(value)
                if masked != value and prefix and ".".join(prefix) not in listed:
                    listed.append(".".join(prefix))
                out[key] = masked
                continue
            if isinstance(value, dict):
                out[key] = walk(value, (*prefix, key))
                continue
            masked = withheld.value(value)
            if masked != value:
                listed.append(".".join((*prefix, key)))
            out[key] = masked
        return out

    return walk(args, ()), listed


def mask_shown(shown: dict[str, Any], withheld: Withheld) -> dict[str, Any]:
    """A request's shown copy with the run's withheld values masked everywhere in it. An
    argument whose value masking changed joins ``shown["redacted"]``."""
    if not withheld:
        return shown
    out: dict[str, Any] = {}
    added: list[str] = []
    for key, value in shown.items():
        if key == SHOWN_KEY:
            out[key] = value
        elif key == "args" and isinstance(value, dict):
            out[key], added = _masked_args(value, withheld)
        else:
            out[key] = withheld.value(value)
    if added:
        before = shown.get(SHOWN_KEY)
        listed = list(before) if isinstance(before, list) else []
        out[SHOWN_KEY] = listed + [p for p in added if p not in listed]
    return out
