"""The conformance run's wiring: one test per kit vector, and a closing tally.

Our own parametrization (``ctk_vector``, ``test_ctk.py``) runs the vectors as async tests in
the session's event loop, so the run fits a plain ``pytest``. The kit's plugin runs each vector
with ``asyncio.run`` in a sync test (``test_ctk_plugin.py``); when it is told to run a harness
it takes over, so no vector runs twice.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from agent_hooks.ctk import load_vectors

SPEC = "AGENT-HOOKS-0.1"
#: The node id prefix of the tests that run vectors (test_ctk.py and test_ctk_plugin.py).
VECTOR_TESTS = "tests/conformance/test_ctk"
PLUGIN_TESTS = "test_ctk_plugin.py"

#: Vectors that fail because of a defect in our host (graphs/), with the defect. They are
#: strict xfails: listed in the tally as failed, and failing the run once they pass, so the
#: entry is removed with the fix. Each has a proposed fix in docs/conformance.md.
KNOWN_HOST_DEFECTS: dict[str, str] = {}

#: Each conformance test's outcome, by node id, for the closing tally.
_outcomes: dict[str, str] = {}


def _plugin_runs(config: pytest.Config) -> bool:
    """The kit's plugin (installed as a pytest11 entry point, or given with ``-p``) was told
    which harness to run."""
    return bool(config.getoption("--agent-hooks-harness", default=None))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "ctk_vector" in metafunc.fixturenames:
        vectors = load_vectors()
        metafunc.parametrize("ctk_vector", vectors, ids=[v["id"] for v in vectors])


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.name == PLUGIN_TESTS and not _plugin_runs(config):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    plugin_runs = _plugin_runs(config)
    kept, dropped = [], []
    for item in items:
        if plugin_runs and item.nodeid.startswith(f"{VECTOR_TESTS}.py::"):
            dropped.append(item)
            continue
        kept.append(item)
        vector_id = _vector_id(item)
        if vector_id in KNOWN_HOST_DEFECTS:
            reason = f"known host defect: {KNOWN_HOST_DEFECTS[vector_id]}"
            item.add_marker(pytest.mark.xfail(reason=reason, raises=AssertionError, strict=True))
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not report.nodeid.startswith(VECTOR_TESTS):
        return
    if report.failed:
        _outcomes[report.nodeid] = "failed"
    elif hasattr(report, "wasxfail"):
        _outcomes[report.nodeid] = "known defect"
    elif report.skipped:
        _outcomes[report.nodeid] = "skipped"
    elif report.when == "call":
        _outcomes[report.nodeid] = "passed"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _outcomes:
        return
    tally = Counter(_outcomes.values())
    failed = tally["failed"] + tally["known defect"]
    line = (
        f"{SPEC} conformance (LangGraph host): {tally['passed']} passed, "
        f"{tally['skipped']} skipped, {failed} failed"
    )
    if tally["known defect"]:
        known = sorted(
            _id_of(nodeid) for nodeid, outcome in _outcomes.items() if outcome == "known defect"
        )
        line += f" ({tally['known defect']} known host defect, expected: {', '.join(known)})"
    terminalreporter.write_line(line, bold=True, red=failed > 0, green=failed == 0)


def _vector_id(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    vector = callspec.params.get("ctk_vector") or callspec.params.get("agent_hooks_vector")
    return vector.get("id") if isinstance(vector, dict) else None


def _id_of(nodeid: str) -> str:
    return nodeid.rsplit("[", 1)[-1].rstrip("]")
