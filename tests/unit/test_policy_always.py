"""A policy rule's ``allow_always``: whether its approver may decide "always" (a standing grant
for the rest of the run) and within what bounds; what reaches the approval block, what a grant's
bounds cover, and what a bad field is refused with (``FILE:LINE: reason``)."""

from __future__ import annotations

import math
import textwrap

import pytest

from approvals.grants import Bound, Offer, Within
from approvals.policy import PolicyError, escalation_of, parse_policy
from tests.unit.test_policy import REFUND_HEAD, pre_tool_call

#: An escalate rule for ``refund``, its fields indented as ``fields`` must be (four spaces).
ESCALATE = """\
  - id: refunds
    point: pre_tool_call
    tool: refund
    action: escalate
"""


def refusal(rule: str) -> str:
    with pytest.raises(PolicyError) as caught:
        parse_policy(REFUND_HEAD + textwrap.dedent(rule), "test.yaml")
    return str(caught.value)


def block_of(rule: str, args: dict[str, object]) -> dict[str, object]:
    policy = parse_policy(REFUND_HEAD + textwrap.dedent(rule), "test.yaml")
    verdict = policy.intercept(pre_tool_call("refund", args))
    assert verdict.approval is not None
    return verdict.approval


def test_allow_always_with_bounds_reaches_the_approval_block() -> None:
    block = block_of(
        """\
          - id: refunds
            point: pre_tool_call
            tool: refund
            action: escalate
            allow_always:
              within:
                amount: {min: 0, max: 100}
        """,
        {"amount": 5},
    )
    assert block["allow_always"] == {"within": {"amount": {"min": 0, "max": 100}}}


def test_allow_always_true_covers_any_arguments_and_false_or_absent_offers_nothing() -> None:
    rule = ESCALATE
    assert block_of(rule + "    allow_always: true\n", {})["allow_always"] == {"within": {}}
    assert "allow_always" not in block_of(rule + "    allow_always: false\n", {})
    assert "allow_always" not in block_of(rule, {})
    policy = parse_policy(REFUND_HEAD + rule, "test.yaml")
    verdict = policy.intercept(pre_tool_call("refund", {}))
    escalation = escalation_of(verdict)
    assert escalation is not None
    assert escalation.allow_always is None


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ("    allow_always: 1\n", "expected true or false"),
        ("    allow_always: {within: {amount: {max: lots}}}\n", "expected a number"),
        ("    allow_always: {within: {amount: {}}}\n", "give min, max or both"),
        ("    allow_always: {within: {amount: {min: 5, max: 1}}}\n", "min is more than max"),
        ("    allow_always: {within: {amount: {most: 5}}}\n", "most"),
        ("    allow_always: {upto: 5}\n", "upto"),
        ("    quorum: 2\n    allow_always: true\n", "cannot go with a quorum of 2"),
    ],
)
def test_a_bad_allow_always_is_refused_with_its_line(extra: str, why: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy(REFUND_HEAD + ESCALATE + extra, "test.yaml")
    error = str(caught.value)
    assert error.startswith("test.yaml:"), error
    assert why in error


def test_allow_always_belongs_to_escalate_rules_at_pre_tool_call_only() -> None:
    denied = refusal(
        """\
          - id: refunds
            point: pre_tool_call
            tool: refund
            action: deny
            allow_always: true
        """
    )
    assert "applies only to escalate rules" in denied
    elsewhere = refusal(
        """\
          - id: answers
            point: post_tool_call
            action: escalate
            allow_always: true
        """
    )
    assert "pre_tool_call only" in elsewhere


def test_bounds_cover_finite_numbers_within_them_and_nothing_else() -> None:
    within = Within(bounds={"amount": Bound(max=100)})
    assert within.covers({"amount": 100})
    assert within.covers({"amount": -5.5})
    assert not within.covers({"amount": 100.01})
    assert not within.covers({"amount": True})
    assert not within.covers({"amount": "50"})
    assert not within.covers({"amount": math.nan})
    assert not within.covers({})
    assert Within().covers({"anything": "at all"})


def test_a_malformed_offer_in_a_shown_copy_offers_nothing() -> None:
    assert Offer.of({"allow_always": {"rule": "r", "within": {}}}) == Offer(
        rule="r", within=Within()
    )
    assert Offer.of({}) is None
    assert Offer.of({"allow_always": {"rule": "", "within": {}}}) is None
    assert Offer.of({"allow_always": {"rule": "r", "within": {"a": {"max": "x"}}}}) is None
    assert Offer.of({"allow_always": {"rule": "r", "within": {"a": {"top": 1}}}}) is None


def test_a_rule_lists_its_allow_always_as_policy_check_shows_it() -> None:
    policy = parse_policy(REFUND_HEAD + ESCALATE + "    allow_always: true\n", "test.yaml")
    [rule] = policy.rules
    assert rule.to_json()["allow_always"] == {"within": {}}
    plain = parse_policy(REFUND_HEAD + ESCALATE, "test.yaml")
    assert "allow_always" not in plain.rules[0].to_json()
