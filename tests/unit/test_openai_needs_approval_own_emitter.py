"""The OpenAI host asks about a tool whose ``needs_approval`` says yes under any governance,
including one that builds its own emitter (``Governance(emitter=...)``, for hosts that build it
from a host declaration document): such a governance was returned as given, without
``NeedsApproval``, so a refund the tool says needs approval ran with nobody asked."""

from __future__ import annotations

from typing import Any, NoReturn

from agent_hooks import (
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalResolution,
    ApprovalResolver,
    InterceptionBlocked,
    InterceptionEmitter,
    Verdict,
)

from graphs.governance import Governance, Session
from graphs.openai_host.host import _with_needs_approval


class _NobodyAnswers:
    """A slot whose human has not answered: a liftable deny stands (and it notes the ask)."""

    awaiting_human = False
    failed = False

    def __init__(self) -> None:
        self.asked: list[str | None] = []

    async def resolve(self, request: ApprovalRequest, /) -> ApprovalResolution:
        self.asked.append(request.verdict.reason)
        return ApprovalResolution(
            outcome=ApprovalOutcome.UNRESOLVED, context_identity=request.context_identity
        )

    def suspend(self, context: dict[str, Any]) -> NoReturn:
        raise AssertionError("this slot never waits")


class _AllowsEverything:
    def intercept(self, context: dict[str, Any], /) -> Verdict:
        return Verdict.allow()


def _own_emitter(resolver: ApprovalResolver) -> InterceptionEmitter:
    """A host-declared emitter whose one interceptor allows everything."""
    emitter = InterceptionEmitter(resolver=resolver)
    emitter.register(_AllowsEverything(), name="allow-all")
    return emitter


async def test_needs_approval_asks_under_a_governance_with_its_own_emitter() -> None:
    governance = _with_needs_approval(Governance(emitter=_own_emitter))
    session = Session(governance, graph="openai", run_id="run-1", principal="alice")
    ctx = session.context(
        "pre_tool_call",
        extensions={"tool": {"needs_approval": True, "sensitive": True, "agent": "refunds"}},
        call_id="refund-1001",
        name="issue_refund",
        args={"order_id": "1001", "amount": 25.0},
    )
    slot = _NobodyAnswers()
    try:
        await session.emit(ctx, slot)
    except InterceptionBlocked:
        pass
    else:
        raise AssertionError("issue_refund needs approval, and ran with nobody asked")
    assert slot.asked == ["needs_approval"]
