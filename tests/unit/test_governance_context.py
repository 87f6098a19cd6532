"""A context's deep copy is independent of it, whatever path made it."""

from __future__ import annotations

import copy

from graphs.hooks.emitter import JsonContext


def test_a_deep_copy_shares_nothing_with_the_context() -> None:
    ctx = JsonContext({"tool_call": {"args": {"to": ["a@example.com"]}}, "sequence": 3})
    copied = copy.deepcopy(ctx)
    copied["tool_call"]["args"]["to"].append("b@example.com")
    assert ctx == {"tool_call": {"args": {"to": ["a@example.com"]}}, "sequence": 3}
    assert type(copied) is dict


def test_values_orjson_cannot_carry_are_still_copied_deeply() -> None:
    huge = 2**70
    ctx = JsonContext({"args": {"id": huge, "nested": {"k": [1, 2]}}})
    copied = copy.deepcopy(ctx)
    assert copied == {"args": {"id": huge, "nested": {"k": [1, 2]}}}
    copied["args"]["nested"]["k"].append(3)
    assert ctx["args"]["nested"]["k"] == [1, 2]
