"""make compat's pure parts: the import swap, the junit outcomes, the floors and the list of
known failures (tests/compat). The suites themselves run in make compat, with the network."""

from __future__ import annotations

import collections
import re
import tomllib
from typing import Any

import pytest

from tests.compat.outcomes import (
    UNTRIAGED,
    Floor,
    Outcome,
    ReportError,
    by_function,
    check_known,
    load_known_failures,
    outcomes_from_junit,
    render_known_failures,
    updated_known_failures,
)
from tests.compat.run_suites import SUITES, SuiteResult, problems_of
from tests.compat.swap import SwapError, swap_import

# A stand-in for a peer's test module: the class under test (OrderedDict) is imported beside
# other names; the swap puts `dict` (ours) in its place.
PEER_MODULE = """\
import sys
from collections import (
    Counter,
    OrderedDict,
    deque as queue,
)
from json import dumps

MADE = OrderedDict(a=1)
"""


def run_module(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<peer test module>", "exec"), namespace)  # noqa: S102
    return namespace


def test_the_swap_binds_the_peers_name_to_ours_and_keeps_every_other_import() -> None:
    swapped = swap_import(
        PEER_MODULE, module="collections", name="OrderedDict", replacement="builtins.dict"
    )

    namespace = run_module(swapped)
    assert namespace["OrderedDict"] is dict
    assert type(namespace["MADE"]) is dict
    assert namespace["Counter"] is collections.Counter
    assert namespace["queue"] is collections.deque
    assert "OrderedDict" not in swapped.split("from builtins")[0]
    kept = [line for line in PEER_MODULE.splitlines() if "OrderedDict" not in line]
    assert [line for line in swapped.splitlines() if line in kept] == kept


def test_the_swap_of_a_statements_only_name_replaces_the_statement() -> None:
    swapped = swap_import(
        "from collections import OrderedDict as OD\nx = OD()\n",
        module="collections",
        name="OrderedDict",
        replacement="builtins.dict",
    )

    assert swapped == "from builtins import dict as OD\nx = OD()\n"


def test_the_swap_reaches_imports_inside_functions() -> None:
    source = "def make():\n    from collections import OrderedDict\n    return OrderedDict()\n"

    swapped = swap_import(
        source, module="collections", name="OrderedDict", replacement="builtins.dict"
    )

    assert type(run_module(swapped)["make"]()) is dict


@pytest.mark.parametrize(
    ("source", "refusal"),
    [
        ("from collections import Counter\n", "no `from collections import OrderedDict`"),
        (
            "from collections import OrderedDict\npatch('collections.OrderedDict')\n",
            "collections.OrderedDict reaches OrderedDict",
        ),
        ("import os; from collections import OrderedDict\n", "shares its line"),
    ],
)
def test_the_swap_refuses_what_it_could_not_redirect(source: str, refusal: str) -> None:
    with pytest.raises(SwapError, match=re.escape(refusal)):
        swap_import(source, module="collections", name="OrderedDict", replacement="builtins.dict")


def test_other_dotted_names_of_the_module_do_not_stop_the_swap() -> None:
    source = "import collections.abc\nfrom collections import OrderedDict\n"

    swapped = swap_import(
        source, module="collections", name="OrderedDict", replacement="builtins.dict"
    )

    assert swapped == "import collections.abc\nfrom builtins import dict as OrderedDict\n"


JUNIT = """\
<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="6">
<testcase classname="tests.test_node" name="test_plain" time="0.1"/>
<testcase classname="tests.test_node" name="test_param[a-1]" time="0.1">
  <failure message="assert 1 == 2">...</failure></testcase>
<testcase classname="tests.test_node" name="test_param[b-2]" time="0.1"/>
<testcase classname="tests.test_node.TestGroup" name="test_skipped" time="0.0">
  <skipped type="pytest.skip" message="no">...</skipped></testcase>
<testcase classname="tests.test_node" name="test_teardown" time="0.1">
  <error message="failed on teardown">...</error></testcase>
<testcase classname="tests.test_node" name="test_teardown" time="0.1"/>
</testsuite></testsuites>
"""


def test_junit_outcomes_are_keyed_by_node_id_and_any_failed_phase_fails() -> None:
    outcomes = outcomes_from_junit(JUNIT, "tests/test_node.py")

    assert outcomes == {
        "tests/test_node.py::test_plain": Outcome.PASSED,
        "tests/test_node.py::test_param[a-1]": Outcome.FAILED,
        "tests/test_node.py::test_param[b-2]": Outcome.PASSED,
        "tests/test_node.py::TestGroup::test_skipped": Outcome.SKIPPED,
        "tests/test_node.py::test_teardown": Outcome.FAILED,
    }
    assert by_function(outcomes) == {
        "tests/test_node.py::test_plain": Outcome.PASSED,
        "tests/test_node.py::test_param": Outcome.FAILED,
        "tests/test_node.py::TestGroup::test_skipped": Outcome.SKIPPED,
        "tests/test_node.py::test_teardown": Outcome.FAILED,
    }


def test_a_collection_error_is_no_result() -> None:
    broken = '<testsuites><testsuite><testcase classname="" name="tests.test_node">'
    broken += '<error message="collection failure"/></testcase></testsuite></testsuites>'

    with pytest.raises(ReportError, match=re.escape("not a test of tests/test_node.py")):
        outcomes_from_junit(broken, "tests/test_node.py")


def test_a_floor_keeps_its_share_when_the_suite_grows() -> None:
    floor = Floor(passing=40, of=44, unit="functions")

    assert floor.required(44) == 40
    assert floor.required(45) == 41  # 40.9...: rounded up
    outcomes = {
        "t.py::a[1]": Outcome.PASSED,
        "t.py::a[2]": Outcome.FAILED,
        "t.py::b": Outcome.PASSED,
    }
    assert (floor.counts(outcomes).total, floor.counts(outcomes).passed) == (2, 1)


def test_the_known_failures_check_names_unlisted_failures_and_entries_that_no_longer_hold() -> None:
    outcomes = {
        "t.py::listed_fails": Outcome.FAILED,
        "t.py::unlisted_fails": Outcome.FAILED,
        "t.py::listed_passes": Outcome.PASSED,
        "t.py::listed_skips": Outcome.SKIPPED,
    }
    known = dict.fromkeys(
        ["t.py::listed_fails", "t.py::listed_passes", "t.py::listed_skips", "t.py::gone"], "why"
    )

    check = check_known(outcomes, known)

    assert check.unexpected == ["t.py::unlisted_fails"]
    assert check.stale == ["t.py::listed_passes", "t.py::listed_skips"]
    assert check.unknown == ["t.py::gone"]
    assert not check.ok
    assert check_known(
        outcomes, dict.fromkeys(["t.py::listed_fails", "t.py::unlisted_fails"], "")
    ).ok


def test_the_known_failures_file_round_trips_through_toml() -> None:
    known = {
        "hitl": {'tests/t.py::test_x[a-"b"]': 'the "interrupt" payload \\ differs: ü\nsee #31'},
        "toolnode": {"tests/t.py::TestA::test_y": UNTRIAGED},
    }

    text = render_known_failures(known)

    assert load_known_failures(text) == known
    assert tomllib.loads(text)["toolnode"]["tests/t.py::TestA::test_y"] == {"reason": UNTRIAGED}


def test_an_update_keeps_the_reasons_of_what_still_fails_and_marks_the_new_ones() -> None:
    outcomes = {
        "t.py::old": Outcome.FAILED,
        "t.py::new": Outcome.FAILED,
        "t.py::fixed": Outcome.PASSED,
    }

    updated = updated_known_failures(outcomes, {"t.py::old": "by design", "t.py::fixed": "was"})

    assert updated == {"t.py::new": UNTRIAGED, "t.py::old": "by design"}


def test_a_run_is_refused_when_the_originals_fail_or_ours_is_below_its_floor() -> None:
    hitl = next(s for s in SUITES if s.key == "hitl")
    passing = {f"{hitl.test_file}::test_{i}": Outcome.PASSED for i in range(85)}
    short = {**passing, **{f"{hitl.test_file}::test_{i}": Outcome.FAILED for i in range(6)}}
    listed = {n: "why" for n, o in short.items() if o == Outcome.FAILED}

    assert problems_of(SuiteResult(suite=hitl, original=passing, ours=passing), {}) == []
    assert problems_of(SuiteResult(suite=hitl, original=passing, ours=short), listed) == [
        "hitl: 79 of 85 cases pass, below the floor of 80"
    ]
    broken = {**passing, f"{hitl.test_file}::test_0": Outcome.FAILED}
    assert problems_of(SuiteResult(suite=hitl, original=broken, ours=passing), {}) == [
        f"hitl: the originals do not all pass: {hitl.test_file}::test_0"
    ]
