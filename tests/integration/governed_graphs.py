"""The example refund agent under test interceptors, one graph per guarantee of the governed
loop. Registered by configuration like a user's graphs (``module:attr``)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from agent_hooks import CompositionConfig, Decision, EnforcementMode, Transform, Verdict

from approvals.policy import parse_policy
from graphs.examples import refund
from graphs.hooks.governance import Governance
from graphs.hooks.interceptors import EscalateSensitiveTools
from graphs.tool_call.deps import GraphDeps

Context = dict[str, Any]


def _point(ctx: Context) -> str:
    return str(ctx.get("interception_point"))


def _tool(ctx: Context) -> str | None:
    call = ctx.get("tool_call")
    return call.get("name") if isinstance(call, dict) else None


class RewriteRefundReason:
    """pre_tool_call: every refund's reason is set by policy."""

    def intercept(self, ctx: Context, /) -> Verdict:
        if _point(ctx) == "pre_tool_call" and _tool(ctx) == "issue_refund":
            return Verdict(
                decision=Decision.TRANSFORM,
                reason="reason_set_by_policy",
                transform=Transform(path="$target.reason", value="goodwill (policy)"),
            )
        return Verdict.allow()


class BreakRefundAmount:
    """pre_tool_call: a broken policy sets the refund's amount to something the tool refuses."""

    def intercept(self, ctx: Context, /) -> Verdict:
        if _point(ctx) == "pre_tool_call" and _tool(ctx) == "issue_refund":
            return Verdict(
                decision=Decision.TRANSFORM,
                reason="broken",
                transform=Transform(path="$target.amount", value="lots"),
            )
        return Verdict.allow()


class MaskCustomer:
    """post_tool_call: the customer's address in an order is masked before the model sees it."""

    def intercept(self, ctx: Context, /) -> Verdict:
        if _point(ctx) == "post_tool_call" and _tool(ctx) == "lookup_order":
            value = ctx["tool_result"]["value"]
            if isinstance(value, dict) and "customer" in value:
                return Verdict(
                    decision=Decision.TRANSFORM,
                    reason="mask_customer",
                    transform=Transform(path="$target.customer", value="[masked]"),
                )
        return Verdict.allow()


class SlowAtLookup:
    """pre_tool_call of lookup_order: takes far longer than the interceptor timeout."""

    async def intercept(self, ctx: Context, /) -> Verdict:
        if _point(ctx) == "pre_tool_call" and _tool(ctx) == "lookup_order":
            await asyncio.sleep(5)  # time is the point: the host's timeout must end the wait
        return Verdict.allow()


class RaisesAtLookup:
    def intercept(self, ctx: Context, /) -> Verdict:
        if _point(ctx) == "pre_tool_call" and _tool(ctx) == "lookup_order":
            raise RuntimeError("policy store unreachable")
        return Verdict.allow()


class MalformedAtLookup:
    def intercept(self, ctx: Context, /) -> dict[str, Any]:
        if _point(ctx) == "pre_tool_call" and _tool(ctx) == "lookup_order":
            return {"decision": "maybe"}
        return {"decision": "allow"}


class DenyRefundedResponse:
    """post_model_call: a response announcing a refund is denied."""

    def intercept(self, ctx: Context, /) -> Verdict:
        if _point(ctx) == "post_model_call":
            content = ctx["response"]["content"]
            if isinstance(content, str) and "Refunded" in content:
                return Verdict.deny(reason="no_announcements", message="not to be announced")
        return Verdict.allow()


class DenyOutput:
    def intercept(self, ctx: Context, /) -> Verdict:
        if _point(ctx) == "output":
            return Verdict.deny(reason="answer_withheld", message="the answer is withheld")
        return Verdict.allow()


class MaskAmountsInOutput:
    def intercept(self, ctx: Context, /) -> Verdict:
        if _point(ctx) == "output":
            content = ctx["output"]["content"]
            masked = re.sub(r"\d+\.\d\d", "#.##", content)
            if masked != content:
                return Verdict(
                    decision=Decision.TRANSFORM,
                    reason="mask_amounts",
                    transform=Transform(path="$target.content", value=masked),
                )
        return Verdict.allow()


class EscalateOutput:
    def intercept(self, ctx: Context, /) -> Verdict:
        if _point(ctx) == "output":
            return Verdict.escalate(reason="answer_review", message="a human reviews answers")
        return Verdict.allow()


class DenyInput:
    def intercept(self, ctx: Context, /) -> Verdict:
        if _point(ctx) == "input" and "1004" in str(ctx["input"]["content"]):
            return Verdict.deny(reason="order_locked", message="order 1004 is under review")
        return Verdict.allow()


class EscalateInput:
    def intercept(self, ctx: Context, /) -> Verdict:
        if _point(ctx) == "input" and "1005" in str(ctx["input"]["content"]):
            return Verdict.escalate(reason="input_review", message="a human reads order 1005")
        return Verdict.allow()


class DenyEverything:
    def intercept(self, ctx: Context, /) -> Verdict:
        return Verdict.deny(reason="deny_all")


class AllowEverything:
    def intercept(self, ctx: Context, /) -> Verdict:
        return Verdict.allow()


def _with(deps: GraphDeps, *interceptors: Any, **kw: Any) -> Any:
    return refund.build(deps, governance=Governance(interceptors=interceptors, **kw))


def transform_args(deps: GraphDeps) -> Any:
    return _with(deps, RewriteRefundReason())


def broken_transform(deps: GraphDeps) -> Any:
    return _with(deps, BreakRefundAmount())


def mask_result(deps: GraphDeps) -> Any:
    return _with(deps, MaskCustomer())


def timeout(deps: GraphDeps) -> Any:
    return _with(deps, SlowAtLookup(), timeout=0.2)


def raises(deps: GraphDeps) -> Any:
    return _with(deps, RaisesAtLookup())


def malformed(deps: GraphDeps) -> Any:
    return _with(deps, MalformedAtLookup())


def deny_response(deps: GraphDeps) -> Any:
    return _with(deps, DenyRefundedResponse())


def deny_output(deps: GraphDeps) -> Any:
    return _with(deps, DenyOutput())


def mask_output(deps: GraphDeps) -> Any:
    return _with(deps, MaskAmountsInOutput())


def escalate_output(deps: GraphDeps) -> Any:
    return _with(deps, EscalateOutput())


def deny_input(deps: GraphDeps) -> Any:
    return _with(deps, DenyInput())


def escalate_input(deps: GraphDeps) -> Any:
    return _with(deps, EscalateInput())


def evaluate_only(deps: GraphDeps) -> Any:
    return _with(deps, DenyEverything(), mode=EnforcementMode.EVALUATE_ONLY)


QUORUM_POLICY = """
policy: two-person-refunds
default: allow
rules:
  - id: two-approvers
    point: pre_tool_call
    tool: issue_refund
    action: escalate
    approvers: [support]
    quorum: 2
    reason: refunds need two approvers
"""


def quorum(deps: GraphDeps) -> Any:
    return _with(deps, parse_policy(QUORUM_POLICY, "quorum.yaml"))


def strictest(deps: GraphDeps) -> Any:
    """parallel/strictest: one allow and one escalation of refunds; the escalation wins."""
    return _with(
        deps,
        AllowEverything(),
        EscalateSensitiveTools(["issue_refund"]),
        composition=CompositionConfig.strictest(),
    )


GRAPHS = {
    name: f"tests.integration.governed_graphs:{name}"
    for name in (
        "transform_args",
        "broken_transform",
        "mask_result",
        "timeout",
        "raises",
        "malformed",
        "deny_response",
        "deny_output",
        "escalate_input",
        "mask_output",
        "escalate_output",
        "deny_input",
        "evaluate_only",
        "strictest",
        "quorum",
    )
}
