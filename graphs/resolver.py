"""The approval seam backed by the database: a human decision lifts (or keeps) a liftable deny.

The resolver never trusts the resume payload. It reads the decision the server recorded for
this exact call (run, call id, content identity) and answers the emitter with it, echoing the
emitter's context identity as AGENT-HOOKS-0.1 §9 requires.
"""

from __future__ import annotations

from agent_hooks import (
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalResolution,
    Decision,
    Transform,
    Verdict,
)

from approvals.model import ApprovalRequest as StoredRequest
from approvals.model import Decision as StoredDecision
from approvals.model import DecisionKind, RequestStatus
from approvals.ports import ApprovalRequests


class StoredDecisionResolver:
    """Answers the emitter's approval seam from the decision stored for one call."""

    def __init__(
        self, requests: ApprovalRequests, *, run_id: str, call_id: str, identity: str
    ) -> None:
        self._requests = requests
        self._run_id = run_id
        self._call_id = call_id
        self._identity = identity
        self.escalation: Verdict | None = None
        self.request: StoredRequest | None = None
        self.decision: StoredDecision | None = None
        self.failed = False

    @property
    def awaiting_human(self) -> bool:
        """The seam was consulted and no human has decided this call yet."""
        return (
            self.escalation is not None
            and not self.failed
            and self.decision is None
            and not self.expired
        )

    @property
    def expired(self) -> bool:
        return self.request is not None and self.request.status is RequestStatus.EXPIRED

    async def resolve(self, request: ApprovalRequest, /) -> ApprovalResolution:
        self.escalation = request.verdict
        try:
            return await self._resolve(request)
        except BaseException:
            # Reading the decision failed (or timed out): not "no decision yet". The caller
            # must not pause again on a call that may already be decided.
            self.failed = True
            raise

    async def _resolve(self, request: ApprovalRequest) -> ApprovalResolution:
        echo = request.context_identity
        stored = await self._requests.find(self._run_id, self._call_id, self._identity)
        self.request = stored
        if stored is None or stored.status is RequestStatus.PENDING:
            return ApprovalResolution(outcome=ApprovalOutcome.UNRESOLVED, context_identity=echo)
        if stored.status is RequestStatus.EXPIRED:
            return ApprovalResolution(
                outcome=ApprovalOutcome.REJECT,
                context_identity=echo,
                verdict=Verdict.deny(
                    reason="approval_expired", message="the approval request expired"
                ),
            )
        decision = await self._requests.decision_for(stored.id)
        if decision is None:
            return ApprovalResolution(outcome=ApprovalOutcome.UNRESOLVED, context_identity=echo)
        self.decision = decision
        if decision.kind is DecisionKind.REJECT:
            return ApprovalResolution(
                outcome=ApprovalOutcome.REJECT,
                context_identity=echo,
                verdict=Verdict.deny(reason="rejected_by_approver", message=decision.reason),
            )
        if decision.kind is DecisionKind.EDIT and decision.args is not None:
            return ApprovalResolution(
                outcome=ApprovalOutcome.APPROVE,
                context_identity=echo,
                verdict=Verdict(
                    decision=Decision.TRANSFORM,
                    reason="edited_by_approver",
                    transform=Transform(path="$target", value=decision.args),
                ),
            )
        return ApprovalResolution(
            outcome=ApprovalOutcome.APPROVE,
            context_identity=echo,
            verdict=Verdict(decision=Decision.ALLOW, reason="approved_by_approver"),
        )
