"""An approver's edit is a new call: it goes through ``pre_tool_call`` again before it may run.

Edited arguments can change what a call does (a refund of 25.00 on one order becomes 980.50 on
another), so the approver who edited them is not enough on their own:

- a policy that denies the edited arguments refuses the edit (at decision time: 422 naming the
  rule, and the request stays pending; at execution time: the model is told, the tool never runs);
- a policy that escalates them to a rule that would have offered the approvers who decided the
  same decision (approve, and edit: ``approvals.edit_coverage``) is satisfied by that decision;
- a policy that escalates them anywhere else (other or more approvers, a rule that never
  approves, forbids edits or withholds other arguments) makes the edit a new request under that
  rule, with its own offer and approvers, which the editor may not decide (``proposed_by``);
- a transform that would rewrite the edited arguments refuses them: nobody saw the result.

The same check runs twice: when the decision is made (``recheck_edit``, so the approver learns
at once) and when the call is about to run (``EditRecheckSlot``, because only then does the
engine know the run's state as it really is; policies may also have changed in between).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from agent_hooks import (
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalResolution,
    Decision,
    InterceptionBlocked,
    Verdict,
)

from approvals.edit_coverage import EditCoverage, edit_coverage
from approvals.model import DecisionRecord, PendingCall
from graphs.hooks.approval import ApprovalSlot
from graphs.hooks.governance import Governance, Session
from graphs.tool_call.tools import GovernedTool

#: The reason recorded when an edit's escalation is satisfied by the decision already made.
COVERED_BY_DECISION = "covered_by_decision"


def covers(decided: PendingCall, request: ApprovalRequest) -> EditCoverage:
    """Whether the decision on ``decided`` already satisfies the escalation ``request`` asks
    for the edited arguments (``approvals.edit_coverage``: the one rule for both checks)."""
    return edit_coverage(decided, request.verdict.approval or {}, request.context.get("target"))


def _covered(echo: str | None) -> ApprovalResolution:
    return ApprovalResolution(
        outcome=ApprovalOutcome.APPROVE,
        context_identity=echo,
        verdict=Verdict(decision=Decision.ALLOW, reason=COVERED_BY_DECISION),
    )


class EditRecheckSlot:
    """The approval slot of an edit's re-check at execution time.

    An escalation the decided request ``covers`` is approved by that decision; any other goes
    to ``inner`` (the stored request for the edited arguments, which names the editor as
    ``proposed_by``)."""

    def __init__(self, inner: ApprovalSlot, decided: PendingCall) -> None:
        self._inner = inner
        self._decided = decided
        self.covered = False

    @property
    def awaiting_human(self) -> bool:
        return not self.covered and self._inner.awaiting_human

    @property
    def failed(self) -> bool:
        return self._inner.failed

    @property
    def request(self) -> PendingCall | None:
        found: PendingCall | None = getattr(self._inner, "request", None)
        return found

    @property
    def decision(self) -> DecisionRecord | None:
        found: DecisionRecord | None = getattr(self._inner, "decision", None)
        return found

    async def resolve(self, request: ApprovalRequest, /) -> ApprovalResolution:
        if covers(self._decided, request).covered:
            self.covered = True
            return _covered(request.context_identity)
        return await self._inner.resolve(request)

    def suspend(self, context: dict[str, Any]) -> NoReturn:
        self._inner.suspend(context)


class EditOutcome(enum.StrEnum):
    """What the policy says of edited arguments at decision time."""

    #: Allowed, or escalated to a rule the decision covers (``approvals.edit_coverage``).
    ALLOWED = "allowed"
    #: Escalated to a rule the decision does not cover: the edit becomes a new request under
    #: it, with its offer and approvers.
    NEEDS_APPROVAL = "needs_approval"
    DENIED = "denied"
    #: A transform would rewrite the edited arguments: nobody would have seen what runs.
    REWRITTEN = "rewritten"


@dataclass(frozen=True, kw_only=True, slots=True)
class EditCheck:
    outcome: EditOutcome
    #: The rule (verdict reason) that decided, when one did.
    rule: str | None = None
    message: str | None = None
    #: Who must approve the edit (``NEEDS_APPROVAL``).
    approvers: tuple[str, ...] = ()


class _Probe:
    """A slot that answers without asking anyone: covered escalations are approved, any other
    is noted and left unresolved (the deny stands, and the probe says who was asked for)."""

    awaiting_human = False
    failed = False

    def __init__(self, decided: PendingCall) -> None:
        self._decided = decided
        self.covered = False
        self.wanted: Mapping[str, Any] | None = None
        #: Why the decision does not cover the escalation in ``wanted``.
        self.why = ""

    async def resolve(self, request: ApprovalRequest, /) -> ApprovalResolution:
        approval = request.verdict.approval or {}
        coverage = covers(self._decided, request)
        if coverage.covered:
            self.covered = True
            return _covered(request.context_identity)
        self.wanted = approval
        self.why = coverage.reason
        return ApprovalResolution(
            outcome=ApprovalOutcome.UNRESOLVED, context_identity=request.context_identity
        )

    def suspend(self, context: dict[str, Any]) -> NoReturn:  # pragma: no cover - never awaits
        raise AssertionError("a probe never waits for a human")


async def recheck_edit(
    *,
    governance: Governance,
    graph: str,
    tool: GovernedTool,
    request: PendingCall,
    args: dict[str, Any],
    tool_counts: Mapping[str, int],
) -> EditCheck:
    """Emit ``pre_tool_call`` for ``args`` (already validated) as the run would, without
    asking anyone and without recording anything, and say what the policy makes of them."""
    session = Session(
        governance, graph=graph, run_id=request.run_id, principal=request.requested_by
    )
    counts = dict(tool_counts)
    ctx = session.context(
        "pre_tool_call",
        extensions=tool_extensions(tool, counts),
        call_id=request.call_id,
        name=tool.name,
        args=args,
    )
    probe = _Probe(request)
    try:
        outcome = await session.emit(ctx, probe)
    except InterceptionBlocked as blocked:
        verdict = blocked.result.verdict
        if probe.wanted is not None:
            approvers = probe.wanted.get("approvers")
            return EditCheck(
                outcome=EditOutcome.NEEDS_APPROVAL,
                rule=str(probe.wanted.get("rule") or verdict.reason or "") or None,
                message=probe.why or verdict.message,
                approvers=tuple(approvers) if isinstance(approvers, list) else (),
            )
        return EditCheck(
            outcome=EditOutcome.DENIED,
            rule=verdict.reason,
            message=verdict.message or "the policy denies these arguments",
        )
    if outcome.target != args:
        return EditCheck(
            outcome=EditOutcome.REWRITTEN,
            rule=outcome.record.verdict.reason,
            message="a policy would rewrite the edited arguments before they run",
        )
    return EditCheck(outcome=EditOutcome.ALLOWED)


def tool_extensions(tool: GovernedTool, counts: Mapping[str, int]) -> dict[str, Any]:
    """What ``pre_tool_call`` carries for policies beyond the contract's fields: the tool's
    metadata and how often tools ran in this run."""
    return {
        "tool": tool.describe_for_policy(),
        "tool_count": counts.get(tool.name, 0),
        "tool_counts": dict(counts),
    }


def successful_counts(executions: Sequence[Any]) -> dict[str, int]:
    """How many times each tool ran successfully, from a run's ledger rows (what a decision
    made outside the run knows of ``run.tool_count``)."""
    counts: dict[str, int] = {}
    for row in executions:
        if str(row.status) == "succeeded" and not row.error:
            counts[row.tool] = counts.get(row.tool, 0) + 1
    return counts
