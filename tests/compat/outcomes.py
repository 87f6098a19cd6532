"""Per-test outcomes of a peer suite's run, their counts, the floors and the known failures."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Literal

UNTRIAGED = "not yet triaged"


class Outcome(enum.StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


class ReportError(ValueError):
    """The junit report holds something other than the suite's tests (a collection error)."""


def outcomes_from_junit(xml_text: str, test_file: str) -> dict[str, Outcome]:
    """Per node id (``tests/x.py::Class::test[param]``), the outcome in a pytest junit report
    of ``test_file``; a test that failed in one phase (setup, call, teardown) failed."""
    module = test_file.removesuffix(".py").replace("/", ".")
    outcomes: dict[str, Outcome] = {}
    # The report is the one the pytest that make compat started has just written.
    for case in ET.fromstring(xml_text).iter("testcase"):  # noqa: S314
        classname, name = case.get("classname", ""), case.get("name", "")
        if classname == module:
            node_id = f"{test_file}::{name}"
        elif classname.startswith(module + "."):
            node_id = f"{test_file}::{classname[len(module) + 1 :].replace('.', '::')}::{name}"
        else:
            raise ReportError(f"pytest reported {classname or name!r}, not a test of {test_file}")
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = Outcome.FAILED
        elif case.find("skipped") is not None:
            outcome = Outcome.SKIPPED
        else:
            outcome = Outcome.PASSED
        if outcomes.get(node_id) != Outcome.FAILED:
            outcomes[node_id] = outcome
    return outcomes


def by_function(outcomes: Mapping[str, Outcome]) -> dict[str, Outcome]:
    """The outcome per test function: failed if a case failed, passed if every case passed."""
    cases: dict[str, list[Outcome]] = {}
    for node_id, outcome in outcomes.items():
        cases.setdefault(node_id.split("[", 1)[0], []).append(outcome)
    functions = {}
    for function, seen in cases.items():
        if Outcome.FAILED in seen:
            functions[function] = Outcome.FAILED
        elif all(o == Outcome.PASSED for o in seen):
            functions[function] = Outcome.PASSED
        else:
            functions[function] = Outcome.SKIPPED
    return functions


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Counts:
    total: int
    passed: int
    failed: int
    skipped: int

    @classmethod
    def of(cls, outcomes: Mapping[str, Outcome]) -> Counts:
        seen = list(outcomes.values())
        return cls(
            total=len(seen),
            passed=seen.count(Outcome.PASSED),
            failed=seen.count(Outcome.FAILED),
            skipped=seen.count(Outcome.SKIPPED),
        )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Floor:
    """At least ``passing`` of ``of`` tests pass, counted in ``unit`` (parametrized cases, or
    test functions); a suite whose total moved (another version) keeps the same share, rounded
    up."""

    passing: int
    of: int
    unit: Literal["cases", "functions"]

    def counts(self, outcomes: Mapping[str, Outcome]) -> Counts:
        return Counts.of(by_function(outcomes) if self.unit == "functions" else outcomes)

    def required(self, total: int) -> int:
        return math.ceil(total * self.passing / self.of)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class KnownCheck:
    """Ours against the list: failures it does not name, and entries that no longer hold
    (the test did not fail, or is no longer in the suite)."""

    unexpected: list[str]
    stale: list[str]
    unknown: list[str]

    @property
    def ok(self) -> bool:
        return not (self.unexpected or self.stale or self.unknown)


def check_known(outcomes: Mapping[str, Outcome], known: Mapping[str, str]) -> KnownCheck:
    failed = {node_id for node_id, outcome in outcomes.items() if outcome == Outcome.FAILED}
    return KnownCheck(
        unexpected=sorted(failed - known.keys()),
        stale=sorted(n for n in known if n in outcomes and n not in failed),
        unknown=sorted(n for n in known if n not in outcomes),
    )


def load_known_failures(text: str) -> dict[str, dict[str, str]]:
    """Per suite key, node id -> reason."""
    known: dict[str, dict[str, str]] = {}
    for suite, entries in tomllib.loads(text).items():
        known[suite] = {node_id: str(entry["reason"]) for node_id, entry in entries.items()}
    return known


KNOWN_FAILURES_HEADER = """\
# The tests of the peers' suites that fail with our class swapped in (make compat,
# docs/compat.md), by suite, each with the reason it cannot pass. make compat fails when ours
# fails a test not listed here, and when a listed test no longer fails (remove its entry).
# `.venv/bin/python -m tests.compat.run_suites --update-known-failures` rewrites this file from
# a run, keeping the reasons of the entries that still fail.
"""


def render_known_failures(known: Mapping[str, Mapping[str, str]]) -> str:
    parts = [KNOWN_FAILURES_HEADER]
    for suite in sorted(known):
        if not known[suite]:
            parts.append(f"\n[{suite}]\n")
        for node_id in sorted(known[suite]):
            # A TOML basic string takes JSON's escapes.
            reason = json.dumps(known[suite][node_id], ensure_ascii=False)
            parts.append(f"\n[{suite}.{json.dumps(node_id)}]\nreason = {reason}\n")
    return "".join(parts)


def updated_known_failures(
    outcomes: Mapping[str, Outcome], known: Mapping[str, str]
) -> dict[str, str]:
    """The list for a run: its failures, each with its reason if listed, else ``UNTRIAGED``."""
    failed = sorted(n for n, o in outcomes.items() if o == Outcome.FAILED)
    return {n: known.get(n, UNTRIAGED) for n in failed}
