"""A policy rule names the decisions its approvers are offered (``allowed_decisions``): what
a bad list is refused with, what reaches the approval block, and what policy cases check."""

from __future__ import annotations

import textwrap

import pytest

from approvals.policy import PolicyError, escalation_of, parse_cases, parse_policy, run_cases
from tests.unit.test_policy import REFUND_HEAD, pre_tool_call

ASK = (
    REFUND_HEAD
    + """\
  - id: ask-a-manager
    point: pre_tool_call
    tool: ask_manager
    action: escalate
    allowed_decisions: [respond, reject]
"""
)


def refusal(rules: str) -> PolicyError:
    with pytest.raises(PolicyError) as caught:
        parse_policy(REFUND_HEAD + textwrap.dedent(rules), "test.yaml")
    return caught.value


def test_the_listed_decisions_reach_the_approval_block_in_a_fixed_order() -> None:
    loaded = parse_policy(ASK, "test.yaml")
    verdict = loaded.intercept(pre_tool_call("ask_manager", {"question": "may I?"}))
    assert verdict.approval is not None
    assert verdict.approval["allowed_decisions"] == ["reject", "respond"]
    # Edit is not listed, so the request offers no edit form either.
    assert verdict.approval["allow_edit"] is False
    escalation = escalation_of(verdict)
    assert escalation is not None
    assert escalation.allowed_decisions == ("reject", "respond")
    [rule] = loaded.rules
    assert rule.to_json()["allowed_decisions"] == ["reject", "respond"]


def test_without_a_list_the_block_keeps_its_old_shape() -> None:
    loaded = parse_policy(
        REFUND_HEAD + "  - id: big\n    point: pre_tool_call\n    action: escalate\n",
        "test.yaml",
    )
    verdict = loaded.intercept(pre_tool_call("issue_refund", {"amount": 5}))
    assert verdict.approval is not None
    assert "allowed_decisions" not in verdict.approval
    assert verdict.approval["allow_edit"] is True


def test_an_unknown_decision_is_refused_at_its_line_with_the_known_ones() -> None:
    error = refusal(
        """\
  - id: ask
    point: pre_tool_call
    action: escalate
    allowed_decisions: [approve, always_approve]
"""
    )
    assert error.line == 7
    assert "'always_approve' is not a decision (expected approve, edit, reject, respond)" in (
        error.reason
    )


def test_an_empty_or_repeated_list_is_refused() -> None:
    empty = refusal(
        "  - id: ask\n    point: pre_tool_call\n    action: escalate\n    allowed_decisions: []\n"
    )
    assert "must name at least one decision" in empty.reason
    twice = refusal(
        "  - id: ask\n    point: pre_tool_call\n    action: escalate\n"
        "    allowed_decisions: [reject, reject]\n"
    )
    assert "'reject' is listed twice" in twice.reason


def test_respond_needs_a_rule_at_pre_tool_call_only() -> None:
    error = refusal(
        """\
  - id: answer
    point: [pre_tool_call, post_tool_call]
    action: escalate
    allowed_decisions: [respond]
"""
    )
    assert "respond answers a tool call in the tool's place" in error.reason


def test_allow_edit_that_contradicts_the_list_is_refused() -> None:
    on = refusal(
        "  - id: ask\n    point: pre_tool_call\n    action: escalate\n"
        "    allow_edit: true\n    allowed_decisions: [approve, reject]\n"
    )
    assert "allow_edit is true but allowed_decisions does not list edit" in on.reason
    off = refusal(
        "  - id: ask\n    point: pre_tool_call\n    action: escalate\n"
        "    allow_edit: false\n    allowed_decisions: [approve, edit]\n"
    )
    assert "allowed_decisions lists edit but allow_edit is false" in off.reason


def test_the_list_is_refused_on_a_rule_that_does_not_escalate() -> None:
    error = refusal(
        "  - id: never\n    point: pre_tool_call\n    action: deny\n"
        "    allowed_decisions: [reject]\n"
    )
    assert "'allowed_decisions' applies only to escalate rules" in error.reason


def test_a_policy_case_checks_the_offered_decisions() -> None:
    loaded = parse_policy(ASK, "test.yaml")
    cases = parse_cases(
        textwrap.dedent(
            """\
            policy: refund
            cases:
              - name: the manager answers
                point: pre_tool_call
                tool: ask_manager
                args: {question: "may I?"}
                expect: {decision: escalate, allowed_decisions: [respond, reject]}
              - name: wrongly expects the default
                point: pre_tool_call
                tool: ask_manager
                args: {question: "may I?"}
                expect: {decision: escalate, allowed_decisions: [approve, edit, reject]}
            """
        ),
        "cases.yaml",
    )
    right, wrong = run_cases(loaded, cases)
    assert right.passed
    assert not wrong.passed
    assert "decisions: [reject, respond]" in wrong.got
    assert "decisions: [approve, edit, reject]" in wrong.expected
