"""What a run hands the database, made storable: a tool's result, the model's answer, an
error's text (both hosts: graphs/tool_call/execution.py and graphs/openai_host).

They come from outside the engine (a tool reads a page someone else wrote, a model repeats
it), so they may hold what PostgreSQL refuses: a NUL (text and ``jsonb`` cannot hold U+0000),
a lone surrogate (not Unicode, not encodable as UTF-8), NaN or Infinity (not JSON). Refusing
them is no answer: the tool already ran. Each such character is kept as a visible escape
(``\\u0000``, ``\\ud800``) and each non-finite number as its name, so the ledger, the run's row
and what the model is given all say the same thing, and nothing else changes.
"""

from __future__ import annotations

import math
from typing import Any


def storable_text(text: str) -> str:
    """``text`` with each NUL and lone surrogate as a ``\\uXXXX`` escape."""
    if "\x00" not in text:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            pass
        else:
            return text
    return "".join(
        f"\\u{ord(c):04x}" if c == "\x00" or 0xD800 <= ord(c) <= 0xDFFF else c for c in text
    )


def storable(value: Any) -> Any:
    """``value`` with every string and key made storable (``storable_text``) and every
    non-finite float as its name; anything not JSON as its text."""
    if isinstance(value, str):
        return storable_text(value)
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {storable_text(str(k)): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return storable_text(str(value))
