"""The example refund agent under policies that say what happens when a request's deadline
passes. Registered by configuration like a user's graphs (``module:attr``)."""

from __future__ import annotations

from typing import Any

from approvals.policy import parse_policy
from graphs.examples import refund
from graphs.hooks.governance import Governance
from graphs.tool_call.deps import GraphDeps

#: Support has ten minutes; then finance has an hour; then the refund is rejected as expired.
ESCALATING_POLICY = """
policy: escalating-refunds
default: allow
rules:
  - id: refunds-escalate
    point: pre_tool_call
    tool: issue_refund
    action: escalate
    approvers: [support]
    expires_in: 10m
    on_expiry: escalate
    then:
      - approvers: [finance]
        expires_in: 1h
    reason: support first, then finance
"""

#: Two approvers, and a chain: votes cast before an escalation still count after it.
ESCALATING_QUORUM_POLICY = """
policy: escalating-two-person-refunds
default: allow
rules:
  - id: two-approvers-escalate
    point: pre_tool_call
    tool: issue_refund
    action: escalate
    approvers: [support]
    quorum: 2
    expires_in: 10m
    on_expiry: escalate
    then:
      - approvers: [finance, risk]
        expires_in: 30m
"""


def _with_policy(deps: GraphDeps, text: str, name: str) -> Any:
    return refund.build(deps, governance=Governance(interceptors=[parse_policy(text, name)]))


def escalating(deps: GraphDeps) -> Any:
    return _with_policy(deps, ESCALATING_POLICY, "escalating.yaml")


def escalating_quorum(deps: GraphDeps) -> Any:
    return _with_policy(deps, ESCALATING_QUORUM_POLICY, "escalating-quorum.yaml")


GRAPHS = {
    name: f"tests.integration.expiry_graphs:{name}" for name in ("escalating", "escalating_quorum")
}
