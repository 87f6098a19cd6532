"""Every conformance vector through our LangGraph host twice, once per emitter
(``APPROVALS_EMITTER=sdk``, then ``fast``): the kit's verdict and the run record it checks
(the records the ``Session`` keeps, identities, outcome, output, tool invocations, error) are
byte-identical. The clock and the run id are fixed per run, so both runs build the same
contexts. ``test_ctk.py`` runs the kit on the default emitter; this proves the setting's two
choices agree on our host, as ``tests/unit/test_emitter_vectors.py`` does on the kit's own
reference agent.
"""

from __future__ import annotations

import itertools
import json
import types
import uuid
from typing import Any

import pytest
from agent_hooks.ctk import RunRecord, load_vectors, run_vector

from tests.conformance import harness as harness_module
from tests.conformance.harness import LangGraphHarness

VECTORS = load_vectors()


class Capturing(LangGraphHarness):
    """Our harness, keeping the run record it hands the kit."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[RunRecord] = []

    async def run(self) -> RunRecord:
        record = await super().run()
        self.records.append(record)
        return record


async def run_with(emitter: str, vector: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("APPROVALS_EMITTER", emitter)
    ticks = itertools.count()
    monkeypatch.setattr(
        "agent_hooks.context._now", lambda: f"2026-01-01T00:00:{next(ticks) % 60:02d}.000000Z"
    )
    fixed = uuid.UUID("00000000-0000-4000-8000-000000000002")
    monkeypatch.setattr(harness_module, "uuid", types.SimpleNamespace(uuid4=lambda: fixed))
    harness = Capturing()
    result = await run_vector(harness, vector)
    runs = [
        {
            "outcome": r.outcome.value,
            "final_output": r.final_output,
            "tool_invocations": r.tool_invocations,
            "error": r.error,
            "identities": r.identities,
            "records": r.records,
        }
        for r in harness.records
    ]
    return json.dumps(
        {"status": result.status, "failures": result.failures, "runs": runs}, sort_keys=True
    )


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
async def test_both_emitters_give_our_host_the_same_run(
    vector: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    sdk = await run_with("sdk", vector, monkeypatch)
    fast = await run_with("fast", vector, monkeypatch)
    assert fast == sdk
