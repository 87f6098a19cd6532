"""Graphs the session's attack tests run (tests/integration/test_attacks_session.py): the refund
agent built with ``graphs.hosts.langgraph.agent.build_agent`` (``refund.build_classic``) under
interceptors that deny or escalate what an attacker would try to slip past. Registered like a
user's graphs."""

from __future__ import annotations

from typing import Any

from agent_hooks import Verdict

from graphs.examples import refund
from graphs.hooks.governance import Governance
from graphs.hooks.interceptors import EscalateSensitiveTools
from graphs.tool_call.deps import GraphDeps
from tests.integration.governed_graphs import DenyInput, EscalateInput, RewriteRefundReason


def classic_deny_input(deps: GraphDeps) -> Any:
    """Input naming order 1004 is denied; every tool call is allowed (nothing escalates)."""
    return refund.build_classic(deps, governance=Governance(interceptors=[DenyInput()]))


def classic_escalate_input(deps: GraphDeps) -> Any:
    """Input naming order 1005 waits for a human; every tool call is allowed."""
    return refund.build_classic(deps, governance=Governance(interceptors=[EscalateInput()]))


def classic_transform_then_escalate(deps: GraphDeps) -> Any:
    """pre_tool_call: a policy rewrites every refund's reason, then the refund escalates."""
    return refund.build_classic(
        deps,
        governance=Governance(
            interceptors=[RewriteRefundReason(), EscalateSensitiveTools(["issue_refund"])]
        ),
    )


POINTS = ("input", "pre_model_call", "post_model_call", "pre_tool_call", "output")


class EscalateAt:
    """Every emission at ``point`` is a liftable deny (a human answers each one)."""

    def __init__(self, point: str) -> None:
        self._point = point

    def intercept(self, ctx: dict[str, Any], /) -> Verdict:
        if ctx.get("interception_point") == self._point:
            return Verdict.escalate(reason=f"review_{self._point}", message="a human looks")
        return Verdict.allow()


def _escalating(point: str, *, classic: bool) -> Any:
    def build(deps: GraphDeps) -> Any:
        governance = Governance(interceptors=[EscalateAt(point)])
        if classic:
            return refund.build_classic(deps, governance=governance)
        return refund.build(deps, governance=governance)

    return build


for _point in POINTS:
    globals()[f"classic_escalate_{_point}"] = _escalating(_point, classic=True)
    globals()[f"middleware_escalate_{_point}"] = _escalating(_point, classic=False)

ESCALATING = tuple(f"{kind}_escalate_{p}" for kind in ("classic", "middleware") for p in POINTS)

GRAPHS = {
    name: f"tests.integration.attack_graphs:{name}"
    for name in (
        "classic_deny_input",
        "classic_escalate_input",
        "classic_transform_then_escalate",
        *ESCALATING,
    )
}
