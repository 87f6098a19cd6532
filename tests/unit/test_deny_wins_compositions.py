"""A policy's deny is never put to a human, whatever composition a user's ``Governance`` names:
under every profile and knob the SDK offers, either the governance is refused when it is made
or the call is denied without anyone being asked. ``parallel/unanimous`` with
``on_disagreement: approval`` turned a policy deny (and a policy that failed) into a question
for a human, whose approval ran the call (issue 30, item 0)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

import pytest
from agent_hooks import (
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalResolution,
    CompositionConfig,
    Decision,
    InterceptionBlocked,
    OnApproval,
    SynthesisPolicy,
    Verdict,
)

from graphs.governance import Governance, Session
from graphs.interrupt_on import gates, governance

POLICY = """\
policy: deny-any-composition
version: 1
default: allow
rules:
  - id: no-big-refunds
    point: pre_tool_call
    tool: issue_refund
    when: args.amount > 40.0
    action: deny
  - id: fails-to-evaluate
    point: pre_tool_call
    tool: issue_refund
    when: args.order.id > 1
    action: deny
"""

COMPOSITIONS = {
    "first_deny/stop": CompositionConfig.first_deny(),
    "first_deny/resume": CompositionConfig.first_deny(OnApproval.RESUME),
    "run_all": CompositionConfig.run_all(),
    "strictest": CompositionConfig.strictest(),
    "strictest/approval": CompositionConfig.strictest(SynthesisPolicy.APPROVAL),
    "unanimous": CompositionConfig.unanimous(),
    "unanimous/approval": CompositionConfig.unanimous(
        SynthesisPolicy.APPROVAL, SynthesisPolicy.APPROVAL
    ),
    "unanimous/approval-on-disagreement": CompositionConfig.unanimous(SynthesisPolicy.APPROVAL),
}


class _ApprovesAnything:
    """A slot whose human approves whatever they are asked (and notes that they were)."""

    awaiting_human = False
    failed = False

    def __init__(self) -> None:
        self.asked: list[str | None] = []

    async def resolve(self, request: ApprovalRequest, /) -> ApprovalResolution:
        self.asked.append(request.verdict.reason)
        return ApprovalResolution(
            outcome=ApprovalOutcome.APPROVE,
            context_identity=request.context_identity,
            verdict=Verdict(decision=Decision.ALLOW, reason="approved"),
        )

    def suspend(self, context: dict[str, Any]) -> NoReturn:
        raise AssertionError("an approving slot never waits")


@pytest.mark.parametrize("composition", COMPOSITIONS)
@pytest.mark.parametrize(
    ("args", "rule"),
    [({"amount": 42.0, "order": "1001"}, "no-big-refunds"), ({"amount": 5.0}, "policy_error")],
)
async def test_no_composition_lets_a_human_lift_a_policy_deny(
    tmp_path: Path, composition: str, args: dict[str, Any], rule: str
) -> None:
    policy = tmp_path / "deny.yaml"
    policy.write_text(POLICY)
    try:
        governed = governance(
            gates({"issue_refund": True}),
            "Tool execution requires approval",
            policy,
            Governance(composition=COMPOSITIONS[composition]),
        )
    except ValueError:
        return  # refused when the agent is built: nothing can run under it
    session = Session(governed, graph="refunds", run_id="run-1", principal="alice")
    ctx = session.context("pre_tool_call", call_id="refund-1", name="issue_refund", args=args)
    slot = _ApprovesAnything()
    with pytest.raises(InterceptionBlocked) as blocked:
        await session.emit(ctx, slot)
    assert slot.asked == []
    # parallel/unanimous denies a disagreement as such; every other profile names the rule.
    reason = blocked.value.result.verdict.reason
    assert reason in (rule, "host_error:composition_disagreement"), reason
