"""Every conformance vector, run by the kit's reference agent once on agent-hooks-sdk's
``InterceptionEmitter`` and once on ``HostEmitter``: the same verdict of the kit, and the same
run record byte for byte (records, identities, outcome, output, tool invocations).

The reference agent builds its emitter through the host declaration loader (field-based vectors
too), so ``HostEmitter.from_declaration_value`` is what runs. The clock and the session id are
fixed per run so that the two runs' contexts, and so their identities, are the same.

Also here: what the fast path promises beyond equality (who gets a copy), checked directly.
"""

from __future__ import annotations

import itertools
import json
import types
import uuid
from typing import Any, cast

import pytest
from agent_hooks import InterceptionEmitter, Verdict
from agent_hooks.ctk import Harness, RunRecord, load_vectors, run_vector
from agent_hooks.ctk import reference as reference_agent
from agent_hooks.ctk.reference import ReferenceHarness

from graphs.hooks.emitter import HostEmitter, JsonContext, emitter_class
from graphs.hooks.governance import Governance

VECTORS = load_vectors()


class Capturing(ReferenceHarness):
    """The reference agent, keeping the run record it hands the kit."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[RunRecord] = []

    async def run(self) -> RunRecord:
        record = await super().run()
        self.records.append(record)
        return record


async def run_on(
    kind: type[InterceptionEmitter], vector: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> str:
    ticks = itertools.count()
    monkeypatch.setattr(
        "agent_hooks.context._now", lambda: f"2026-01-01T00:00:{next(ticks) % 60:02d}.000000Z"
    )
    fixed = uuid.UUID("00000000-0000-4000-8000-000000000001")
    monkeypatch.setattr(reference_agent, "uuid", types.SimpleNamespace(uuid4=lambda: fixed))
    monkeypatch.setattr(reference_agent, "InterceptionEmitter", kind)
    harness = Capturing()
    # The kit's own reference agent declares capabilities as a frozenset class attribute.
    result = await run_vector(cast(Harness, harness), vector)
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
async def test_a_vector_runs_byte_identically_on_both_emitters(
    vector: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    sdk = await run_on(InterceptionEmitter, vector, monkeypatch)
    fast = await run_on(HostEmitter, vector, monkeypatch)
    assert fast == sdk
    assert json.loads(fast)["status"] in {"pass", "skip"}


class Keeping:
    """Keeps the object it was handed; read-only or not, as told."""

    def __init__(self, read_only: bool) -> None:
        self.context_read_only = read_only
        self.handed: list[dict[str, Any]] = []

    def intercept(self, context: dict[str, Any], /) -> Verdict:
        self.handed.append(context)
        return Verdict.allow()


def context() -> JsonContext:
    return JsonContext(
        {
            "spec": "agent-hooks/0.1",
            "interception_point": "pre_tool_call",
            "timestamp": "2026-01-01T00:00:00.000000Z",
            "sequence": 0,
            "agent": {"id": "a", "framework": "f"},
            "session": {"id": "s"},
            "target": {"to": ["ann@example.com"]},
            "tool_call": {"id": "c", "name": "send", "args": {"to": ["ann@example.com"]}},
        }
    )


async def test_only_an_interceptor_that_may_mutate_the_context_gets_a_copy() -> None:
    reader, writer = Keeping(read_only=True), Keeping(read_only=False)
    emitter = HostEmitter().register(reader).register(writer)
    ctx = context()
    await emitter.emit(ctx)
    assert reader.handed[0] is ctx
    assert writer.handed[0] is not ctx
    assert writer.handed[0] == ctx
    assert writer.handed[0]["target"] is not ctx["target"]


async def test_a_context_that_is_not_plain_json_is_copied_for_everyone() -> None:
    reader = Keeping(read_only=True)
    emitter = HostEmitter().register(reader)
    ctx = dict(context())
    ctx["target"] = {"to": ("ann@example.com",)}  # a tuple: the SDK's path, a deep copy
    await emitter.emit(ctx)
    assert reader.handed[0] is not ctx
    assert reader.handed[0]["target"]["to"] == ("ann@example.com",)


def test_the_policy_engine_declares_itself_read_only() -> None:
    from approvals.policy import Policy

    assert Policy.context_read_only is True


def test_the_setting_picks_the_emitter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("APPROVALS_EMITTER", raising=False)
    assert emitter_class() is HostEmitter
    assert type(Governance(interceptors=[Keeping(True)]).new_emitter()) is HostEmitter
    monkeypatch.setenv("APPROVALS_EMITTER", "sdk")
    assert type(Governance(interceptors=[Keeping(True)]).new_emitter()) is InterceptionEmitter
    monkeypatch.setenv("APPROVALS_EMITTER", "fast")
    assert emitter_class() is HostEmitter
    monkeypatch.setenv("APPROVALS_EMITTER", "turbo")
    with pytest.raises(ValueError, match="APPROVALS_EMITTER"):
        emitter_class()
