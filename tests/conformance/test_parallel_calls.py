"""What the kit does not exercise and our claim of ``parallel_tool_calls`` rests on: the calls
of one model turn run as separate tasks, each pauses for its own human answer in the same
round, one ``Command(resume=...)`` answers both, and each tool runs once.

The scenario is written in the kit's vector format and asserted by the kit's engine.
"""

from __future__ import annotations

from typing import Any

import pytest
from agent_hooks import ApprovalResolver
from agent_hooks.ctk import run_vector

from tests.conformance import harness as harness_module
from tests.conformance.approval_desk import ApprovalDesk, Question

ESCALATE_WIRES = [
    {
        "at": "pre_tool_call",
        "match": {"tool_call.name": "wire_transfer"},
        "return": {"decision": "deny", "reason": "local:requires_approval", "approval": {}},
    }
]
APPROVE = [{"resolve": {"outcome": "approve", "verdict": {"decision": "allow"}}}]
APPROVED_BY_HUMAN = {
    "interception_point": "pre_tool_call",
    "assert": {"verdict.decision": "allow", "resolved_by": "approval"},
}


def _two_calls_one_turn() -> dict[str, Any]:
    calls = [
        {"id": "tc-1", "name": "wire_transfer", "args": {"amount": 100}},
        {"id": "tc-2", "name": "wire_transfer", "args": {"amount": 200}},
    ]
    return {
        "id": "LOCAL-PARALLEL-001",
        "title": "two escalated calls of one turn pause together and each runs once",
        "spec_clause": "3.2, 9",
        "capabilities": ["model_calls", "tool_calls", "parallel_tool_calls"],
        "scenario": {
            "input": {"content": "pay both", "role": "user"},
            "tools": [{"name": "wire_transfer", "behavior": [{"return": {"ok": True}}]}],
            "model_script": [
                {"respond": {"content": None, "tool_calls": calls, "finish_reason": "tool_calls"}},
                {"respond": {"content": "paid", "tool_calls": [], "finish_reason": "stop"}},
            ],
        },
        "interceptor_script": ESCALATE_WIRES,
        "approval_script": APPROVE,
        "expect": {
            "sequence_strict": False,
            "interceptions": [
                {"interception_point": "pre_tool_call"},
                {"interception_point": "post_tool_call"},
            ],
            "tool_invocations": [
                {"name": "wire_transfer", "args": {"amount": 100}},
                {"name": "wire_transfer", "args": {"amount": 200}},
            ],
            "records": [APPROVED_BY_HUMAN, APPROVED_BY_HUMAN],
            "run_outcome": "completed",
            "final_output": "paid",
        },
    }


async def test_two_escalated_calls_of_one_turn_pause_together_and_each_runs_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    desks: list[ApprovalDesk] = []

    class WatchedDesk(ApprovalDesk):
        def __init__(self, human: ApprovalResolver | None) -> None:
            super().__init__(human)
            desks.append(self)

    monkeypatch.setattr(harness_module, "ApprovalDesk", WatchedDesk)
    result = await run_vector(harness_module.LangGraphHarness(), _two_calls_one_turn())

    assert result.status == "pass", "\n".join(result.failures)
    # One pause holds both calls, and one resume answers both.
    assert [desk.rounds for desk in desks] == [
        [(Question("tc-1|wire_transfer", 0), Question("tc-2|wire_transfer", 0))]
    ]
