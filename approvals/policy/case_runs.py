"""Running a table of policy cases: each case becomes the AGENT-HOOKS context a host would send,
goes through the policy, and its verdict is compared with what the case expects.
"""

from __future__ import annotations

import copy
from typing import Any

from agent_hooks import AgentContext, AgentContextBuilder, Decision, InterceptionPoint, Verdict
from agent_hooks.path import PathError
from agent_hooks.path import apply as apply_transform

from approvals.decision_kinds import DEFAULT_DECISIONS
from approvals.model import OnExpiry
from approvals.policy.cases import ABSENT, Case, CaseResult, CasesFile, Expectation, redacted
from approvals.policy.evaluation import Escalation, Policy, approvals_extension, escalation_of
from approvals.policy.source import format_duration


def context_for(case: Case, index: int = 0) -> AgentContext:
    """The AGENT-HOOKS context a host would send for this case."""
    builder = AgentContextBuilder(
        agent_id=case.run.get("graph", "policy-test"),
        framework="approvals-policy-test",
        session_id=case.run.get("id", f"case-{index}"),
    )
    extension = approvals_extension(
        tool=case.metadata if case.metadata is not None else ({} if case.tool else None),
        tool_name=case.tool,
        run_id=case.run.get("id"),
        graph=case.run.get("graph"),
        tool_counts=case.run.get("tool_counts", {}),
    )
    builder.with_l2(
        actor={"id": case.principal, "kind": "human"} if case.principal else None,
        extensions={"approvals": extension},
    )
    call_id = f"case-{index}"
    point = case.point
    if point is InterceptionPoint.AGENT_STARTUP:
        return builder.agent_startup(tools_registered=[])
    if point is InterceptionPoint.INPUT:
        return builder.input(content=case.content if case.content is not None else "")
    if point is InterceptionPoint.PRE_MODEL_CALL:
        return builder.pre_model_call(model_id="policy-test", messages=[])
    if point is InterceptionPoint.POST_MODEL_CALL:
        return builder.post_model_call(
            model_id="policy-test", content=case.content, tool_calls=[], finish_reason="stop"
        )
    if point is InterceptionPoint.PRE_TOOL_CALL:
        return builder.pre_tool_call(call_id=call_id, name=case.tool or "", args=dict(case.args))
    if point is InterceptionPoint.POST_TOOL_CALL:
        return builder.post_tool_call(
            call_id=call_id, name=case.tool or "", args=dict(case.args), value=case.result
        )
    if point is InterceptionPoint.OUTPUT:
        return builder.output(content=case.content if case.content is not None else "")
    return builder.agent_shutdown(reason="completed")


def outcome_of(verdict: Verdict) -> str:
    """The verdict in the words a cases file uses: allow, warn, deny, escalate, transform."""
    if verdict.decision is Decision.TRANSFORM:
        return "transform"
    if verdict.decision is Decision.DENY:
        return "escalate" if verdict.approval is not None else "deny"
    return "warn" if verdict.warnings else "allow"


def _offered(escalation: Escalation) -> tuple[str, ...]:
    """The decisions an escalation offers: its list, or the default."""
    return escalation.allowed_decisions or DEFAULT_DECISIONS


def describe(verdict: Verdict, value: Any = ABSENT) -> str:
    """The verdict in words, as a failing case reports it."""
    outcome = outcome_of(verdict)
    parts = [outcome]
    if verdict.reason is not None:
        parts.append(f"by {verdict.reason}")
    details = []
    if verdict.warnings:
        details.append(f"warnings: [{', '.join(w.reason or '?' for w in verdict.warnings)}]")
    escalation = escalation_of(verdict)
    if escalation is not None:
        details.append(f"approvers: [{', '.join(escalation.approvers)}]")
        expiry = escalation.expires_in
        details.append(f"expires in {format_duration(expiry)}" if expiry else "no expiry")
        details.append("edits allowed" if escalation.allow_edit else "no edits")
        if escalation.on_expiry is OnExpiry.ESCALATE:
            chain = ", then ".join(
                f"[{', '.join(s.approvers)}] for {format_duration(s.expires_in)}"
                for s in escalation.then
            )
            details.append(f"on expiry: escalate to {chain}")
        if escalation.redact:
            details.append(redacted(escalation.redact))
        if escalation.allowed_decisions:
            details.append(f"decisions: [{', '.join(escalation.allowed_decisions)}]")
    if value is not ABSENT:
        details.append(f"value: {value!r}")
    if outcome == "deny" and verdict.message:
        details.append(f"message: {verdict.message}")
    return " ".join(parts) + (f" ({'; '.join(details)})" if details else "")


def run_case(policy: Policy, case: Case, index: int = 0) -> CaseResult:
    """Run one case through the policy and compare the verdict with its expectation."""
    context = context_for(case, index)
    verdict = policy.intercept(copy.deepcopy(context))
    expect = case.expect
    value: Any = ABSENT
    if verdict.transform is not None:
        try:
            value = apply_transform(
                context["target"], verdict.transform.path, verdict.transform.value
            )
        except PathError as exc:
            value = f"<transform does not apply: {exc}>"
    passed = outcome_of(verdict) == expect.decision and _details_match(expect, verdict, value)
    return CaseResult(
        name=case.name,
        passed=passed,
        expected=expect.describe(),
        got=describe(verdict, value if expect.value is not ABSENT else ABSENT),
        line=case.line,
    )


def _details_match(expect: Expectation, verdict: Verdict, value: Any) -> bool:
    warned = tuple(w.reason or "" for w in verdict.warnings)
    if expect.rule is not None:
        if expect.decision == "warn":
            if expect.rule not in warned:
                return False
        elif verdict.reason != expect.rule:
            return False
    if expect.warnings is not None and warned != expect.warnings:
        return False
    escalation = escalation_of(verdict)
    if escalation is not None:
        if expect.approvers is not None and escalation.approvers != expect.approvers:
            return False
        if expect.expires_in is not ABSENT and escalation.expires_in != expect.expires_in:
            return False
        if expect.allow_edit is not None and escalation.allow_edit != expect.allow_edit:
            return False
        if expect.on_expiry is not None and escalation.on_expiry != expect.on_expiry:
            return False
        if expect.redact is not None and escalation.redact != expect.redact:
            return False
        if (
            expect.allowed_decisions is not None
            and _offered(escalation) != expect.allowed_decisions
        ):
            return False
    return expect.value is ABSENT or value == expect.value


def run_cases(policy: Policy, cases: CasesFile) -> list[CaseResult]:
    """Run every case of a file, in order."""
    return [run_case(policy, case, index) for index, case in enumerate(cases.cases)]
