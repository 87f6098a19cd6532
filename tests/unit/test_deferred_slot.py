"""An emission's approval slot is made only when the emission asks it something."""

from __future__ import annotations

from typing import Any, NoReturn

import pytest
from agent_hooks import (
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalResolution,
    InterceptionBlocked,
    Verdict,
)

from graphs.hooks.approval import DeferredSlot
from graphs.hooks.governance import Governance, Session
from graphs.hooks.interceptors import EscalateSensitiveTools


class Approving:
    """A slot whose human already approved."""

    awaiting_human = False
    failed = False
    request = "the stored request"
    decision = "the decision"

    async def resolve(self, request: ApprovalRequest, /) -> ApprovalResolution:
        return ApprovalResolution(
            outcome=ApprovalOutcome.APPROVE,
            context_identity=request.context_identity,
            verdict=Verdict.allow(),
        )

    def suspend(self, context: dict[str, Any]) -> NoReturn:
        raise AssertionError("an approved slot never waits")


def session() -> Session:
    governance = Governance(interceptors=[EscalateSensitiveTools(["refund"])])
    return Session(governance, graph="g", run_id="run-1", principal="alice")


def call(s: Session, tool: str) -> dict[str, Any]:
    return s.context("pre_tool_call", call_id="c1", name=tool, args={"order": 7})


async def test_an_allowed_emission_never_makes_its_slot() -> None:
    made: list[str] = []

    def make() -> Approving:
        made.append("slot")
        return Approving()

    s = session()
    slot = DeferredSlot(make)
    await s.emit(call(s, "lookup"), slot)
    assert made == []
    assert slot.made is None
    assert slot.request is None
    assert slot.decision is None


async def test_an_escalation_makes_the_slot_once_and_takes_its_answer() -> None:
    made: list[str] = []

    def make() -> Approving:
        made.append("slot")
        return Approving()

    s = session()
    slot = DeferredSlot(make)
    outcome = await s.emit(call(s, "refund"), slot)
    assert outcome.record.proceeds
    assert made == ["slot"]
    assert slot.request == "the stored request"
    assert slot.decision == "the decision"


async def test_a_slot_with_nothing_to_ask_denies_as_no_slot_does() -> None:
    s = session()
    with pytest.raises(InterceptionBlocked) as without:
        await s.emit(call(s, "refund"), None)
    slot = DeferredSlot(lambda: None)
    with pytest.raises(InterceptionBlocked) as deferred:
        await s.emit(call(s, "refund"), slot)
    assert deferred.value.result.verdict == without.value.result.verdict
    assert deferred.value.result.verdict.reason == "host_error:approval_unresolved"
    assert not slot.awaiting_human
    assert not slot.failed
