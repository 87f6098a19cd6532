"""Declarative policies: what a bad file is refused with, and what a good one decides."""

from __future__ import annotations

import json
import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from agent_hooks import (
    AgentContextBuilder,
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalResolution,
    Decision,
    InterceptionBlocked,
    InterceptionEmitter,
    Verdict,
    _core,
)

from approvals.errors import ApprovalsError
from approvals.model import EscalationStep
from approvals.policy import (
    Policy,
    PolicyError,
    approvals_extension,
    escalation_of,
    load_cases,
    load_policy,
    parse_cases,
    parse_policy,
    run_cases,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "graphs" / "examples" / "policies"


def policy(text: str) -> Policy:
    return parse_policy(textwrap.dedent(text), "test.yaml")


def refusal(text: str) -> PolicyError:
    with pytest.raises(PolicyError) as caught:
        policy(text)
    return caught.value


def pre_tool_call(
    name: str,
    args: dict[str, Any],
    *,
    metadata: dict[str, Any] | None = None,
    counts: dict[str, int] | None = None,
    principal: str | None = None,
) -> dict[str, Any]:
    builder = AgentContextBuilder(agent_id="refund", framework="langgraph", session_id="run-1")
    builder.with_l2(
        actor={"id": principal, "kind": "human"} if principal else None,
        extensions={
            "approvals": approvals_extension(
                tool=metadata or {}, tool_name=name, run_id="run-1", tool_counts=counts or {}
            )
        },
    )
    return builder.pre_tool_call(call_id="call-1", name=name, args=args)


def post_tool_call(name: str, value: Any) -> dict[str, Any]:
    builder = AgentContextBuilder(agent_id="refund", framework="langgraph", session_id="run-1")
    return builder.post_tool_call(call_id="call-1", name=name, args={}, value=value)


REFUND_HEAD = """\
policy: refund
default: allow
rules:
"""


# ---- refusals: every mistake names its line ----------------------------------------------------


def test_a_yaml_syntax_error_names_its_line() -> None:
    error = refusal(
        """\
        policy: refund
        default: allow
        rules:
          - id: a
            point: [pre_tool_call
            action: deny
        """
    )
    assert error.line == 6
    assert str(error).startswith("test.yaml:6: invalid YAML:")
    assert isinstance(error, ApprovalsError)


def test_an_unknown_rule_field_is_named_with_the_allowed_ones() -> None:
    error = refusal(
        REFUND_HEAD
        + """\
  - id: big-refunds
    point: pre_tool_call
    action: escalate
    approver: [finance]
"""
    )
    assert error.line == 7
    assert "unknown field 'approver'" in error.reason
    assert "allowed: id, description, point, tool, when" in error.reason
    assert "approvers" in error.reason


def test_unknown_fields_are_refused_at_every_level() -> None:
    top = refusal("policy: refund\ndefault: allow\nrules: []\nowner: finance\n")
    assert (top.line, "unknown field 'owner'" in top.reason) == (4, True)
    nested = refusal(
        REFUND_HEAD
        + """\
  - id: mask-cards
    point: post_tool_call
    action: transform
    mask:
      pattern: '\\d{16}'
      flags: i
"""
    )
    assert nested.line == 9
    assert "unknown field 'flags'" in nested.reason
    assert "allowed: pattern, replacement" in nested.reason


def test_a_wrong_type_is_refused_at_the_value() -> None:
    error = refusal(
        REFUND_HEAD
        + """\
  - id: a
    point: pre_tool_call
    priority: high
    action: deny
"""
    )
    assert error.line == 6
    assert error.reason == "rule a: priority: expected an integer, got a string"


def test_an_unknown_point_or_action_lists_the_known_ones() -> None:
    point = refusal(
        REFUND_HEAD + "  - id: a\n    point: [pre_tool_call, tool_call]\n    action: deny\n"
    )
    assert point.line == 5
    assert "unknown point 'tool_call'" in point.reason
    assert "pre_tool_call" in point.reason
    action = refusal(REFUND_HEAD + "  - id: a\n    point: input\n    action: block\n")
    assert action.line == 6
    assert (
        "unknown value 'block' (allowed: allow, warn, deny, escalate, transform)" in action.reason
    )


def test_a_condition_that_does_not_compile_names_the_when_line_and_the_cel_error() -> None:
    error = refusal(
        REFUND_HEAD
        + """\
  - id: big-refunds
    point: pre_tool_call
    tool: issue_refund
    when: args.amount >
    action: deny
"""
    )
    assert error.line == 7
    assert (
        "rule big-refunds: condition does not compile: <input>:1:14: Syntax error" in error.reason
    )
    assert "\n" not in str(error)


def test_a_condition_in_a_literal_block_names_the_line_cel_complains_about() -> None:
    error = refusal(
        REFUND_HEAD
        + """\
  - id: big-refunds
    point: pre_tool_call
    when: |
      args.amount > 100.0 &&
      args.currency ==
    action: deny
"""
    )
    assert error.line == 8
    assert "<input>:2:" in error.reason


def test_a_condition_naming_an_unknown_variable_is_refused() -> None:
    error = refusal(
        REFUND_HEAD
        + """\
  - id: big-refunds
    point: pre_tool_call
    when: amount > 100.0
    action: deny
"""
    )
    assert error.line == 6
    assert "unknown variable 'amount'" in error.reason
    assert "variables: args, content, point, principal, result, run, tool" in error.reason


def test_comprehension_and_type_names_are_not_unknown_variables() -> None:
    loaded = policy(
        REFUND_HEAD
        + """\
  - id: pricey-items
    point: pre_tool_call
    when: type(args) == map && args.items.exists(i, i.price > 10.0)
    action: deny
"""
    )
    assert loaded.rules[0].when is not None
    assert loaded.rules[0].when.variables == {"args"}


def test_a_variable_the_rule_points_never_carry_is_refused() -> None:
    error = refusal(
        REFUND_HEAD
        + """\
  - id: check-result
    point: pre_tool_call
    when: result.ok
    action: deny
"""
    )
    assert error.line == 6
    assert "uses 'result', which is null except at post_tool_call" in error.reason


def test_an_invalid_regular_expression_is_refused() -> None:
    error = refusal(
        REFUND_HEAD
        + """\
  - id: mask-cards
    point: post_tool_call
    action: transform
    mask: {pattern: '(\\d{16}', replacement: '[card]'}
"""
    )
    assert error.line == 7
    assert "mask.pattern is not a valid regular expression: missing )" in error.reason


def test_a_bad_duration_is_refused() -> None:
    error = refusal(
        REFUND_HEAD
        + """\
  - id: big-refunds
    point: pre_tool_call
    action: escalate
    expires_in: 2 hours
"""
    )
    assert error.line == 7
    assert "expires_in: expected a duration such as 30m, 2h or 1d" in error.reason


@pytest.mark.parametrize(
    "field",
    [
        "    expires_in: 200000000d\n",
        "    on_expiry: escalate\n    then:\n      - {approvers: [finance], expires_in: 3651d}\n",
    ],
)
def test_a_deadline_past_ten_years_is_refused(field: str) -> None:
    # A deadline some hundred thousand years out overflowed the timestamp in the sweep, whose
    # every pass then failed on that request: nothing expired or escalated again.
    error = refusal(
        REFUND_HEAD
        + "  - id: big-refunds\n    point: pre_tool_call\n    action: escalate\n"
        + "    approvers: [support]\n"
        + field
    )
    assert "a duration must be at most 3650d" in error.reason
    too_far = {"approvers": ["a"], "expires_in_seconds": 3651 * 86400}
    assert EscalationStep.from_json(too_far) is None


def test_a_quorum_out_of_range_or_off_an_escalation_is_refused() -> None:
    zero = refusal(
        REFUND_HEAD
        + """\
  - id: big-refunds
    point: pre_tool_call
    action: escalate
    quorum: 0
"""
    )
    assert zero.line == 7
    assert "quorum must be between 1 and 20, not 0" in zero.reason
    on_deny = refusal(
        REFUND_HEAD
        + """\
  - id: never
    point: pre_tool_call
    action: deny
    quorum: 2
"""
    )
    assert on_deny.line == 7
    assert "'quorum' applies only to escalate rules" in on_deny.reason


def test_a_quorum_reaches_the_approval_block() -> None:
    loaded = policy(
        REFUND_HEAD
        + """\
  - id: two-person
    point: pre_tool_call
    action: escalate
    quorum: 2
"""
    )
    verdict = loaded.intercept(pre_tool_call("issue_refund", {"amount": 5}))
    assert verdict.approval is not None
    assert verdict.approval["quorum"] == 2
    escalation = escalation_of(verdict)
    assert escalation is not None
    assert escalation.quorum == 2


def test_a_duplicate_rule_id_names_both_lines() -> None:
    error = refusal(
        REFUND_HEAD
        + """\
  - id: a
    point: input
    action: warn
  - id: a
    point: output
    action: warn
"""
    )
    assert error.line == 7
    assert error.reason == "duplicate rule id 'a' (first defined on line 4)"


def test_escalation_fields_on_a_deny_rule_are_refused() -> None:
    error = refusal(
        REFUND_HEAD
        + """\
  - id: a
    point: pre_tool_call
    action: deny
    approvers: [finance]
"""
    )
    assert error.line == 7
    assert "'approvers' applies only to escalate rules (this rule's action is deny)" in error.reason


def test_a_transform_where_transforms_are_forbidden_is_refused() -> None:
    error = refusal(
        REFUND_HEAD
        + """\
  - id: a
    point: [input, agent_startup]
    action: transform
    mask: {pattern: secret}
"""
    )
    assert error.line == 5
    assert "a transform is not permitted at agent_startup" in error.reason


def test_set_only_at_pre_tool_call_and_tool_only_at_tool_points() -> None:
    on_results = refusal(
        REFUND_HEAD
        + """\
  - id: a
    point: post_tool_call
    action: transform
    set: {path: currency, value: EUR}
"""
    )
    assert on_results.line == 5
    assert "must apply at pre_tool_call only" in on_results.reason
    on_input = refusal(REFUND_HEAD + "  - id: a\n    point: input\n    tool: x\n    action: deny\n")
    assert on_input.line == 6
    assert "'tool' applies only at pre_tool_call and post_tool_call" in on_input.reason


def test_a_missing_field_and_an_empty_file_are_refused() -> None:
    missing = refusal("policy: refund\nrules: []\n")
    assert (missing.line, missing.reason) == (1, "policy: missing field 'default'")
    assert str(refusal("")) == "test.yaml:1: the file is empty"


def test_a_missing_file_is_refused_without_a_line(tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as caught:
        load_policy(tmp_path / "nope.yaml")
    assert caught.value.line is None
    assert str(caught.value).startswith(f"{tmp_path / 'nope.yaml'}: cannot read the file")


def test_the_shipped_example_policies_load() -> None:
    refund = load_policy(EXAMPLES / "refund.yaml")
    email = load_policy(EXAMPLES / "email.yaml")
    assert refund.name == "refund"
    assert {p.value for p in refund.points} == {"pre_tool_call", "post_tool_call"}
    assert {p.value for p in email.points} == {"input", "pre_tool_call", "post_tool_call"}
    assert refund.rules[0].id == "no-huge-refunds"


# ---- evaluation ---------------------------------------------------------------------------------


def test_higher_priority_decides_and_ties_keep_file_order() -> None:
    loaded = policy(
        REFUND_HEAD
        + """\
  - id: first-escalate
    point: pre_tool_call
    action: escalate
  - id: second-escalate
    point: pre_tool_call
    action: escalate
  - id: urgent-deny
    point: pre_tool_call
    when: args.amount > 1000.0
    priority: 5
    action: deny
"""
    )
    assert loaded.intercept(pre_tool_call("issue_refund", {"amount": 5000})).reason == "urgent-deny"
    assert loaded.intercept(pre_tool_call("issue_refund", {"amount": 50})).reason == (
        "first-escalate"
    )


def test_warnings_accumulate_until_a_rule_decides() -> None:
    loaded = policy(
        REFUND_HEAD
        + """\
  - id: repeat
    point: pre_tool_call
    when: run.tool_count >= 2
    action: warn
    reason: third call
  - id: costly
    point: pre_tool_call
    when: tool.estimated_cost != null && tool.estimated_cost > 10.0
    action: warn
  - id: finance-only
    point: pre_tool_call
    when: args.amount > 100.0
    action: allow
"""
    )
    context = pre_tool_call(
        "issue_refund", {"amount": 500}, metadata={"estimated_cost": 20}, counts={"issue_refund": 2}
    )
    verdict = loaded.intercept(context)
    assert verdict.decision is Decision.ALLOW
    assert verdict.reason == "finance-only"
    assert [(w.reason, w.message) for w in verdict.warnings] == [
        ("repeat", "third call"),
        ("costly", "flagged by rule costly"),
    ]
    small = loaded.intercept(pre_tool_call("issue_refund", {"amount": 5}))
    assert small == Verdict.allow()


def test_no_match_falls_to_the_default() -> None:
    deny = policy("policy: p\ndefault: deny\npoints: pre_tool_call\nrules: []\n")
    verdict = deny.intercept(pre_tool_call("anything", {}))
    assert (verdict.decision, verdict.reason, verdict.approval) == (Decision.DENY, "default", None)
    escalate = policy("policy: p\ndefault: escalate\npoints: pre_tool_call\nrules: []\n")
    verdict = escalate.intercept(pre_tool_call("anything", {}))
    assert escalation_of(verdict) is not None
    assert escalation_of(verdict) == escalation_of(verdict)
    assert verdict.approval == {
        "rule": "default",
        "approvers": [],
        "expires_in_seconds": None,
        "allow_edit": True,
        "quorum": 1,
    }


def test_a_policy_allows_without_looking_at_points_it_does_not_govern() -> None:
    deny = policy("policy: p\ndefault: deny\npoints: pre_tool_call\nrules: []\n")
    assert deny.intercept(post_tool_call("lookup_order", {"x": 1})) == Verdict.allow()


@pytest.mark.parametrize(
    ("condition", "args", "message"),
    [
        ("args.amount > 100.0", {}, "rule guard: no such key: 'amount'"),
        ("args.amount > 100.0", {"amount": "lots"}, "rule guard: No such overload"),
        ("args.amount", {"amount": 5}, "rule guard: condition is int, not a boolean"),
    ],
)
def test_an_evaluation_error_denies(condition: str, args: dict[str, Any], message: str) -> None:
    loaded = policy(
        REFUND_HEAD
        + f"""\
  - id: guard
    point: pre_tool_call
    when: '{condition}'
    action: escalate
"""
    )
    verdict = loaded.intercept(pre_tool_call("issue_refund", args))
    assert verdict.decision is Decision.DENY
    assert verdict.approval is None
    assert verdict.reason == "policy_error"
    assert verdict.message is not None
    assert verdict.message.startswith(message)


def test_a_rule_for_another_tool_is_not_evaluated() -> None:
    loaded = policy(
        REFUND_HEAD
        + """\
  - id: refunds-only
    point: pre_tool_call
    tool: issue_*
    when: args.amount > 100.0
    action: deny
"""
    )
    assert loaded.intercept(pre_tool_call("lookup_order", {"order_id": "1"})) == Verdict.allow()
    assert loaded.intercept(pre_tool_call("issue_refund", {"amount": 101})).reason == (
        "refunds-only"
    )


def test_conditions_see_principal_tool_metadata_and_run() -> None:
    loaded = policy(
        REFUND_HEAD
        + """\
  - id: seen
    point: pre_tool_call
    when: >-
      principal == "alice" && tool.name == "issue_refund" && tool.risk == "high"
      && tool.approver_group == null && tool.sensitive && run.id == "run-1"
      && run.graph == "refund" && run.tool_counts["lookup_order"] == 3 && run.tool_count == 0
    action: deny
"""
    )
    context = pre_tool_call(
        "issue_refund",
        {},
        metadata={"risk": "high", "sensitive": True},
        counts={"lookup_order": 3},
        principal="alice",
    )
    assert loaded.intercept(context).reason == "seen"


def test_has_tests_for_an_optional_argument() -> None:
    loaded = policy(
        REFUND_HEAD
        + """\
  - id: needs-reason
    point: pre_tool_call
    when: '!has(args.reason)'
    action: deny
"""
    )
    assert loaded.intercept(pre_tool_call("issue_refund", {})).reason == "needs-reason"
    assert loaded.intercept(pre_tool_call("issue_refund", {"reason": "x"})) == Verdict.allow()


def test_escalation_carries_its_parameters_and_passes_the_core_verdict_gate() -> None:
    loaded = policy(
        REFUND_HEAD
        + """\
  - id: big-refunds
    point: pre_tool_call
    action: escalate
    approvers: [finance, risk]
    expires_in: 1h30m
    allow_edit: false
    reason: big refund
"""
    )
    verdict = loaded.intercept(pre_tool_call("issue_refund", {"amount": 500}))
    assert verdict.is_liftable
    checked = json.loads(_core.validate_verdict(json.dumps(verdict.to_wire())))
    assert checked["approval"] == {
        "rule": "big-refunds",
        "approvers": ["finance", "risk"],
        "expires_in_seconds": 5400,
        "allow_edit": False,
        "quorum": 1,
    }
    escalation = escalation_of(Verdict.from_wire(checked))
    assert escalation is not None
    assert escalation.rule == "big-refunds"
    assert escalation.approvers == ("finance", "risk")
    assert escalation.expires_in == timedelta(hours=1, minutes=30)
    assert escalation.allow_edit is False


def test_escalation_of_other_verdicts() -> None:
    assert escalation_of(Verdict.allow()) is None
    assert escalation_of(Verdict.deny(reason="no")) is None
    other = escalation_of(Verdict.escalate(reason="sensitive_tool"))
    assert other is not None
    assert (other.rule, other.approvers, other.expires_in, other.allow_edit) == (
        "sensitive_tool",
        (),
        None,
        True,
    )


def test_mask_rewrites_every_string_of_the_target_and_is_skipped_when_nothing_changes() -> None:
    loaded = policy(
        """\
        policy: p
        default: deny
        rules:
          - id: mask-cards
            point: post_tool_call
            action: transform
            mask: {pattern: '\\b\\d{13,19}\\b', replacement: '[card]'}
          - id: results-pass
            point: post_tool_call
            action: allow
        """
    )
    value = {"card": "4111111111111111", "history": [{"note": "paid by 4111111111111111"}], "n": 4}
    verdict = loaded.intercept(post_tool_call("lookup_order", value))
    assert verdict.decision is Decision.TRANSFORM
    assert verdict.transform is not None
    assert verdict.transform.path == "$target"
    assert verdict.transform.value == {
        "card": "[card]",
        "history": [{"note": "paid by [card]"}],
        "n": 4,
    }
    clean = loaded.intercept(post_tool_call("lookup_order", {"status": "paid"}))
    assert clean.reason == "results-pass"


def test_set_replaces_an_argument_or_adds_a_missing_one() -> None:
    loaded = policy(
        REFUND_HEAD
        + """\
  - id: force-currency
    point: pre_tool_call
    tool: issue_refund
    action: transform
    set: {path: currency, value: EUR}
"""
    )
    replaced = loaded.intercept(pre_tool_call("issue_refund", {"amount": 5, "currency": "USD"}))
    assert replaced.transform is not None
    assert (replaced.transform.path, replaced.transform.value) == ("$target.currency", "EUR")
    added = loaded.intercept(pre_tool_call("issue_refund", {"amount": 5}))
    assert added.transform is not None
    assert (added.transform.path, added.transform.value) == (
        "$target",
        {"amount": 5, "currency": "EUR"},
    )
    same = loaded.intercept(pre_tool_call("issue_refund", {"amount": 5, "currency": "EUR"}))
    assert same == Verdict.allow()


# ---- through a real emitter ---------------------------------------------------------------------


async def test_a_set_transform_changes_the_args_the_host_runs_with() -> None:
    loaded = policy(
        """
        policy: reasons
        default: allow
        rules:
          - id: refunds-carry-a-reason
            point: pre_tool_call
            tool: issue_refund
            when: '!has(args.reason)'
            action: transform
            set: {path: reason, value: customer request}
        """
    )
    emitter = InterceptionEmitter().register(loaded, name="policy:refund", at=loaded.points)
    context = pre_tool_call("issue_refund", {"order_id": "1001", "amount": 12.5})
    outcome = await emitter.emit(context)
    assert outcome.target == {"order_id": "1001", "amount": 12.5, "reason": "customer request"}
    assert context["tool_call"]["args"] == outcome.target
    record = outcome.record
    assert record.verdict.decision is Decision.TRANSFORM
    assert record.verdict.reason == "refunds-carry-a-reason"
    assert record.input_identity != record.enforced_identity


async def test_an_escalation_is_a_liftable_deny_the_approval_seam_can_lift() -> None:
    loaded = load_policy(EXAMPLES / "refund.yaml")
    seen: list[ApprovalRequest] = []

    class Approve:
        def resolve(self, request: ApprovalRequest, /) -> ApprovalResolution:
            seen.append(request)
            return ApprovalResolution(
                outcome=ApprovalOutcome.APPROVE,
                context_identity=request.context_identity,
                verdict=Verdict.allow(),
            )

    args = {"order_id": "1002", "amount": 120.0, "reason": "customer request"}
    blocked = InterceptionEmitter().register(loaded, at=loaded.points)
    with pytest.raises(InterceptionBlocked) as caught:
        await blocked.emit(pre_tool_call("issue_refund", args))
    record = caught.value.result
    assert (record.verdict.reason, record.verdict.is_liftable) == ("big-refunds-need-finance", True)
    # The record is payload-free: the approval parameters reach the host through the seam.
    assert record.verdict.approval == {}

    lifted = InterceptionEmitter(resolver=Approve()).register(loaded, at=loaded.points)
    outcome = await lifted.emit(pre_tool_call("issue_refund", args))
    assert outcome.record.resolved_by == "approval"
    assert outcome.target == args
    assert seen[0].verdict.approval == {
        "rule": "big-refunds-need-finance",
        "approvers": ["finance"],
        "expires_in_seconds": 7200,
        "allow_edit": True,
        "quorum": 1,
    }
    escalation = escalation_of(seen[0].verdict)
    assert escalation is not None
    assert (escalation.approvers, escalation.expires_in) == (("finance",), timedelta(hours=2))


# ---- cases files --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["refund", "email"])
def test_the_shipped_cases_pass(name: str) -> None:
    loaded = load_policy(EXAMPLES / f"{name}.yaml")
    cases = load_cases(EXAMPLES / f"{name}.cases.yaml")
    assert cases.policy == EXAMPLES / f"{name}.yaml"
    results = run_cases(loaded, cases)
    assert [r.name for r in results if not r.passed] == []
    assert len(results) >= 8


def test_a_wrong_expectation_fails_and_says_what_happened() -> None:
    loaded = load_policy(EXAMPLES / "refund.yaml")
    cases = parse_cases(
        textwrap.dedent(
            """\
            cases:
              - name: big refund
                point: pre_tool_call
                tool: issue_refund
                args: {order_id: "1002", amount: 120.0, reason: x}
                expect: {decision: escalate, approvers: [support]}
            """
        ),
        "c.yaml",
    )
    (result,) = run_cases(loaded, cases)
    assert not result.passed
    assert result.expected == "escalate (approvers: [support])"
    assert result.got.startswith("escalate by big-refunds-need-finance (approvers: [finance];")


def test_an_unknown_field_in_a_cases_file_is_refused() -> None:
    with pytest.raises(PolicyError) as caught:
        parse_cases(
            "cases:\n  - name: a\n    point: input\n    expect: allow\n    expected: deny\n",
            "c.yaml",
        )
    assert caught.value.line == 5
    assert "unknown field 'expected'" in caught.value.reason


ESCALATING_RULE = """\
  - id: refunds-escalate
    point: pre_tool_call
    tool: issue_refund
    action: escalate
    approvers: [support]
    expires_in: 30m
"""


def test_an_escalation_chain_reaches_the_approval_block_and_escalation_of() -> None:
    loaded = policy(
        REFUND_HEAD
        + ESCALATING_RULE
        + """\
    on_expiry: escalate
    then:
      - approvers: [support-leads]
        expires_in: 2h
      - {approvers: [finance, risk], expires_in: 1d}
"""
    )
    verdict = loaded.intercept(pre_tool_call("issue_refund", {"amount": 5}))
    checked = json.loads(_core.validate_verdict(json.dumps(verdict.to_wire())))
    assert checked["approval"]["on_expiry"] == "escalate"
    assert checked["approval"]["then"] == [
        {"approvers": ["support-leads"], "expires_in_seconds": 7200},
        {"approvers": ["finance", "risk"], "expires_in_seconds": 86400},
    ]
    escalation = escalation_of(Verdict.from_wire(checked))
    assert escalation is not None
    assert escalation.on_expiry == "escalate"
    assert [(s.approvers, s.expires_in) for s in escalation.then] == [
        (("support-leads",), timedelta(hours=2)),
        (("finance", "risk"), timedelta(days=1)),
    ]
    assert loaded.rules[0].to_json()["then"][1]["approvers"] == ["finance", "risk"]


def test_rejecting_on_expiry_is_the_default_and_keeps_the_block_as_it_was() -> None:
    for extra in ("", "    on_expiry: reject\n"):
        loaded = policy(REFUND_HEAD + ESCALATING_RULE + extra)
        verdict = loaded.intercept(pre_tool_call("issue_refund", {"amount": 5}))
        assert verdict.approval is not None
        assert "on_expiry" not in verdict.approval
        assert "then" not in verdict.approval
        escalation = escalation_of(verdict)
        assert escalation is not None
        assert (escalation.on_expiry, escalation.then) == ("reject", ())


@pytest.mark.parametrize(
    ("extra", "line", "message"),
    [
        (
            "    then:\n      - {approvers: [finance], expires_in: 1h}\n",
            10,
            "'then' is an escalation chain, used only with on_expiry: escalate",
        ),
        (
            "    on_expiry: reject\n    then:\n      - {approvers: [finance], expires_in: 1h}\n",
            11,
            "'then' is an escalation chain, used only with on_expiry: escalate",
        ),
        (
            "    on_expiry: escalate\n",
            10,
            "on_expiry: escalate needs an escalation chain in 'then'",
        ),
        ("    on_expiry: escalate\n    then: []\n", 11, "then: name at least one escalation step"),
        (
            "    on_expiry: later\n",
            10,
            "on_expiry: unknown value 'later' (allowed: reject, escalate)",
        ),
        (
            "    on_expiry: escalate\n    then: {approvers: [finance], expires_in: 1h}\n",
            11,
            "then: expected a list of {approvers, expires_in} steps",
        ),
        (
            "    on_expiry: escalate\n    then:\n"
            "      - {approvers: [finance], expires_in: soon}\n",
            12,
            "then[0].expires_in: expected a duration such as 30m, 2h or 1d",
        ),
        (
            "    on_expiry: escalate\n    then:\n      - {approvers: [finance]}\n",
            12,
            "then[0]: missing field 'expires_in'",
        ),
        (
            "    on_expiry: escalate\n    then:\n      - {approvers: [], expires_in: 1h}\n",
            12,
            "then[0].approvers: name at least one group",
        ),
        (
            "    on_expiry: escalate\n    then:\n"
            "      - {approvers: [a], expires_in: 1h}\n"
            "      - {approvers: [b], expires_in: 1h, quorum: 2}\n",
            13,
            "then[1]: unknown field 'quorum' (allowed: approvers, expires_in)",
        ),
        (
            "    on_expiry: escalate\n    then:\n      - {approvers: [a, a], expires_in: 1h}\n",
            12,
            "then[0].approvers: 'a' is listed twice",
        ),
    ],
)
def test_a_bad_expiry_or_escalation_chain_is_refused_with_its_line(
    extra: str, line: int, message: str
) -> None:
    error = refusal(REFUND_HEAD + ESCALATING_RULE + extra)
    assert (error.line, message in error.reason) == (line, True), error


def test_on_expiry_and_then_apply_only_to_escalate_rules() -> None:
    error = refusal(
        REFUND_HEAD
        + """\
  - id: never
    point: pre_tool_call
    action: deny
    on_expiry: escalate
"""
    )
    assert error.line == 7
    assert "'on_expiry' applies only to escalate rules" in error.reason


def test_a_chain_longer_than_ten_steps_is_refused() -> None:
    steps = "".join(f"      - {{approvers: [g{i}], expires_in: 1h}}\n" for i in range(11))
    error = refusal(REFUND_HEAD + ESCALATING_RULE + "    on_expiry: escalate\n    then:\n" + steps)
    assert error.line == 22
    assert "at most 10 escalation steps" in error.reason


def test_a_malformed_chain_from_another_interceptor_falls_back_to_rejecting() -> None:
    verdict = Verdict.escalate(reason="x")
    verdict = Verdict.from_wire(
        {
            **verdict.to_wire(),
            "approval": {
                "on_expiry": "escalate",
                "then": [{"approvers": ["a"], "expires_in_seconds": 60}, {"approvers": []}],
            },
        }
    )
    escalation = escalation_of(verdict)
    assert escalation is not None
    assert (escalation.on_expiry, escalation.then) == ("reject", ())


def test_a_case_may_expect_what_happens_on_expiry() -> None:
    loaded = policy(
        REFUND_HEAD
        + ESCALATING_RULE
        + "    on_expiry: escalate\n    then:\n      - {approvers: [finance], expires_in: 1h}\n"
    )
    cases = parse_cases(
        textwrap.dedent(
            """\
            cases:
              - name: escalates on expiry
                point: pre_tool_call
                tool: issue_refund
                args: {amount: 5}
                expect: {decision: escalate, on_expiry: escalate}
              - name: wrongly expects a rejection
                point: pre_tool_call
                tool: issue_refund
                args: {amount: 5}
                expect: {decision: escalate, on_expiry: reject}
            """
        ),
        "c.yaml",
    )
    passed, failed = run_cases(loaded, cases)
    assert passed.passed
    assert not failed.passed
    assert "on expiry: escalate to [finance] for 1h" in failed.got
    with pytest.raises(PolicyError, match=r"expect\.on_expiry: unknown value 'never'"):
        parse_cases(
            "cases:\n  - name: a\n    point: pre_tool_call\n    tool: t\n"
            "    expect: {decision: escalate, on_expiry: never}\n",
            "c.yaml",
        )


# ---- redact: arguments the approver is not shown ------------------------------------------------

CARD_RULE = """\
  - id: card-payments
    point: pre_tool_call
    tool: pay
    action: escalate
    approvers: [finance]
"""


def test_redact_paths_reach_the_approval_block_relative_to_the_arguments() -> None:
    loaded = policy(REFUND_HEAD + CARD_RULE + "    redact: [args.card_number, args.payment.cvv]\n")
    assert loaded.rules[0].redact == ("card_number", "payment.cvv")
    assert loaded.rules[0].to_json()["redact"] == ["args.card_number", "args.payment.cvv"]
    verdict = loaded.intercept(pre_tool_call("pay", {"card_number": "4111111111111111"}))
    checked = json.loads(_core.validate_verdict(json.dumps(verdict.to_wire())))
    assert checked["approval"]["redact"] == ["card_number", "payment.cvv"]
    escalation = escalation_of(Verdict.from_wire(checked))
    assert escalation is not None
    assert escalation.redact == ("card_number", "payment.cvv")


def test_an_escalation_without_redact_keeps_its_block_as_before() -> None:
    verdict = policy(REFUND_HEAD + CARD_RULE).intercept(pre_tool_call("pay", {}))
    assert verdict.approval is not None
    assert "redact" not in verdict.approval


@pytest.mark.parametrize(
    ("entries", "line", "says"),
    [
        ("[card_number]", 9, "'card_number' does not name a tool argument: write args.<key>"),
        ("[args.card_number, result.x]", 9, "'result.x' does not name a tool argument"),
        ("['args.items[0].card']", 9, "list items cannot be redacted one by one"),
        ("[args.card number]", 9, "is not a key path such as args.card_number"),
        ("[args.a, args.a]", 9, "'args.a' is listed twice"),
        ("[args.payment, args.payment.cvv]", 9, "args.payment.cvv lies inside args.payment"),
        ("[args.payment.cvv, args.payment]", 9, "args.payment.cvv lies inside args.payment"),
        ("[]", 9, "redact: name at least one argument"),
        ("args.card_number", 9, "redact: expected a list of strings"),
        ("[1]", 9, "redact: expected a string, got an integer"),
    ],
)
def test_a_redact_path_that_names_no_argument_is_refused_with_its_line(
    entries: str, line: int, says: str
) -> None:
    error = refusal(REFUND_HEAD + CARD_RULE + f"    redact: {entries}\n")
    assert error.line == line
    assert error.reason.startswith("rule card-payments: ")
    assert says in error.reason


def test_a_redact_entry_on_its_own_line_is_named_by_that_line() -> None:
    error = refusal(
        REFUND_HEAD + CARD_RULE + "    redact:\n      - args.card_number\n      - args.items[1]\n"
    )
    assert error.line == 11
    assert "list items cannot be redacted" in error.reason


def test_redact_off_an_escalation_or_off_pre_tool_call_is_refused() -> None:
    on_deny = refusal(
        REFUND_HEAD
        + "  - id: never\n    point: pre_tool_call\n    action: deny\n    redact: [args.card]\n"
    )
    assert on_deny.line == 7
    assert "'redact' applies only to escalate rules (this rule's action is deny)" in on_deny.reason
    elsewhere = refusal(
        REFUND_HEAD
        + "  - id: both\n    point: [pre_tool_call, post_tool_call]\n    action: escalate\n"
        + "    redact: [args.card]\n"
    )
    assert elsewhere.line == 7
    assert "'redact' names tool arguments, so the rule must apply at pre_tool_call only" in (
        elsewhere.reason
    )


def test_a_case_may_expect_what_an_escalation_redacts() -> None:
    loaded = policy(REFUND_HEAD + CARD_RULE + "    redact: [args.card_number]\n")
    cases = parse_cases(
        textwrap.dedent(
            """\
            cases:
              - name: card is redacted
                point: pre_tool_call
                tool: pay
                args: {card_number: "4111111111111111"}
                expect: {decision: escalate, redact: [args.card_number]}
              - name: wrongly expects nothing redacted
                point: pre_tool_call
                tool: pay
                args: {card_number: "4111111111111111"}
                expect: {decision: escalate, redact: []}
            """
        ),
        "c.yaml",
    )
    passed, failed = run_cases(loaded, cases)
    assert passed.passed
    assert not failed.passed
    assert "redact: [args.card_number]" in failed.got
    assert "nothing redacted" in failed.expected
    with pytest.raises(PolicyError, match=r"c\.yaml:5: .*expect\.redact: 'card' does not name"):
        parse_cases(
            "cases:\n  - name: a\n    point: pre_tool_call\n    tool: t\n"
            "    expect: {decision: escalate, redact: [card]}\n",
            "c.yaml",
        )
