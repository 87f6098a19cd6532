"""A long-running process freezes its heap once up (web.engine.freeze_heap): the graphs are
built first, so LangGraph's objects are frozen with the rest, and a graph that cannot be built
does not stop the process (its first run raises, as it would have)."""

from __future__ import annotations

import gc
import logging
from typing import Any, cast

import pytest

from web.engine import Engine, freeze_heap


class Stub:
    def __init__(self, fails: bool) -> None:
        self.fails = fails
        self.built = 0

    @property
    def registry(self) -> object:
        self.built += 1
        if self.fails:
            raise ImportError("no such agent module")
        return object()


@pytest.mark.parametrize("fails", [False, True])
def test_the_graphs_are_built_then_the_heap_is_frozen(
    fails: bool, caplog: pytest.LogCaptureFixture
) -> None:
    stub = Stub(fails)
    assert gc.get_freeze_count() == 0
    try:
        with caplog.at_level(logging.WARNING, logger="approvals.web"):
            freeze_heap(cast(Engine, cast(Any, stub)))
        assert stub.built == 1
        assert gc.get_freeze_count() > 0
        assert ("could not build the graphs" in caplog.text) is fails
    finally:
        gc.unfreeze()
