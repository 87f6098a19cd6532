"""The refund agent under policies whose rule for refunds above 100.00 is one an edit must not
slip into: support may only answer or reject such a refund (``answer_only``), or may approve it
as shown but neither edit it nor see its order (``no_edit``). Smaller refunds escalate to the same
support group with the default offer, so an edit from a small refund into a big one lands in the
stricter rule with the same approvers."""

from __future__ import annotations

from typing import Any

from langgraph.pregel import Pregel

from approvals.policy import parse_policy
from graphs.examples import refund
from graphs.hooks.governance import Governance
from graphs.tool_call.deps import GraphDeps

SMALL_RULE = """\
  - id: refunds-need-support
    point: pre_tool_call
    tool: issue_refund
    action: escalate
    approvers: [support]
    reason: a refund moves money and needs a support lead
"""

ANSWER_ONLY = (
    """\
policy: refund-answer-only
default: allow
rules:
  - id: big-refunds-answer-only
    point: pre_tool_call
    tool: issue_refund
    when: args.amount > 100.0
    priority: 10
    action: escalate
    approvers: [support]
    allowed_decisions: [respond, reject]
    reason: support answers refunds above 100.00; it never approves them here
"""
    + SMALL_RULE
)

NO_EDIT = (
    """\
policy: refund-no-edit
default: allow
rules:
  - id: big-refunds-as-shown
    point: pre_tool_call
    tool: issue_refund
    when: args.amount > 100.0
    priority: 10
    action: escalate
    approvers: [support]
    allow_edit: false
    redact: [args.order_id]
    reason: a refund above 100.00 is approved as proposed, on an order support does not see
"""
    + SMALL_RULE
)

#: The registry entries of both agents (``Settings.graphs``).
GRAPHS = {
    "refund-answer-only": "tests.integration.edit_landing_graphs:build_answer_only",
    "refund-no-edit": "tests.integration.edit_landing_graphs:build_no_edit",
}


def _build(deps: GraphDeps, text: str, name: str) -> Pregel[Any, Any, Any, Any]:
    policy = parse_policy(text, f"{name}.yaml")
    return refund.build(deps, governance=Governance(interceptors=[policy], names=[name]))


def build_answer_only(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    return _build(deps, ANSWER_ONLY, "policy:refund-answer-only")


def build_no_edit(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    return _build(deps, NO_EDIT, "policy:refund-no-edit")
