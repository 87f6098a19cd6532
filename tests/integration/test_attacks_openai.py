"""Attacks on OpenAI-SDK runs through their stored state: an insider who can write every state
table, and holds the app's secret, replaces a paused run's ``RunState`` with JSON the SDK
reads as valid but that names another agent (or is no state at all), and seals every version
to match (without the secret, the seal refuses it first: test_openai_state_seal). Nothing may
run, the run must fail visibly with the audit log saying why, and the worker must not retry
the job forever."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.helpers import scalar, side_effects
from tests.integration.test_openai_runs import start, stored_state
from tests.integration.test_openai_state_seal import refusals, sealed_version
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _other_agent(state: dict[str, Any]) -> dict[str, Any]:
    forged: dict[str, Any] = json.loads(json.dumps(state))
    forged["current_agent"]["name"] = "Unrestricted refunder"
    return forged


def _no_state(state: dict[str, Any]) -> dict[str, Any]:
    return {"schema_version": state.get("schema_version")}


def _not_an_object(state: dict[str, Any]) -> Any:
    return ["not", "a", "state"]


@pytest.mark.parametrize("forge", [_other_agent, _no_state, _not_an_object])
async def test_a_stored_state_forged_into_another_shape_fails_the_run_once(
    engine: Engine, forge: Any
) -> None:
    run = await start(engine, "refund 1001")
    [request_id] = run.pending
    stored = await stored_state(engine, run.run_id)
    forged = json.dumps(forge(json.loads(stored["state"])), sort_keys=True)
    version = await sealed_version(engine, run.run_id, forged)
    async with engine.connection() as conn:
        await conn.execute(
            "UPDATE openai_run_states SET state = %s, version = %s WHERE run_id = %s",
            (forged, version, run.run_id),
        )
        await conn.execute(
            "UPDATE approval_requests SET state_version = %s WHERE run_id = %s",
            (version, run.run_id),
        )
    await engine.decide_as_operator(request_id, "approve", principal="bob")
    assert await engine.drain() == 1
    # A second pass finds nothing: the job ended, it is not retried on every pass.
    assert await engine.drain() == 0
    failed = await engine.runs.get(run.run_id)
    assert failed is not None
    assert failed.status == "failed", failed
    assert failed.error is not None
    assert "stored run state" in failed.error, failed.error
    assert await side_effects(engine, run.run_id, "refund-1001") == []
    jobs = await scalar(
        engine,
        "SELECT array_agg(status) FROM resume_queue WHERE run_id = %s",
        run.run_id,
    )
    assert jobs == ["failed"]
    [refused] = await refusals(engine, run.run_id)
    assert refused["reason"] == "unreadable", refused


#: What a hostile system hands an approved tool to return: a NUL and a lone surrogate.
HOSTILE = "before\x00after \ud800 end"
#: The same, as the ledger, the model and the run's answer keep it.
ESCAPED = "before\\u0000after \\ud800 end"


def hostile_script(text: str, outputs: dict[str, Any]) -> tuple[list[Any], str]:
    if "note-1" not in outputs:
        return [("note-1", "fetch_note", {"note_id": "1"})], ""
    # The model repeats what the tool said, bytes and all.
    return [], f"The note says: {outputs['note-1']}\x00"


def hostile_agent(deps: Any, script: Any = hostile_script) -> Any:
    from agents import Agent, function_tool

    from graphs.examples.openai_refund import ScriptedModel

    # failure_error_function=None: a failure reaches the host (the SDK would otherwise
    # answer the model with its own message and the call would look successful).
    @function_tool(needs_approval=True, failure_error_function=None)
    async def fetch_note(note_id: str) -> str:
        """Read a note someone else wrote."""
        if note_id == "broken":
            raise ValueError(HOSTILE)
        return HOSTILE

    return Agent(name="notes", model=ScriptedModel(script), tools=[fetch_note])


def failing_script(text: str, outputs: dict[str, Any]) -> tuple[list[Any], str]:
    if "note-1" not in outputs:
        return [("note-1", "fetch_note", {"note_id": "broken"})], ""
    return [], f"The tool said: {outputs['note-1']}"


def failing_agent(deps: Any) -> Any:
    return hostile_agent(deps, failing_script)


async def _approved_and_resumed(engine: Engine, name: str, attr: str) -> Any:
    engine.registry._entries[name] = f"tests.integration.test_attacks_openai:{attr}"
    run = await engine.runner.start(name, {"message": "read note 1"}, principal="alice")
    assert run.status == "waiting", run
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    assert await engine.drain() == 1
    assert await engine.drain() == 0
    ended = await engine.runs.get(run.run_id)
    assert ended is not None
    return ended


async def test_an_approved_tool_returning_hostile_bytes_is_kept_escaped_and_the_run_ends(
    engine: Engine,
) -> None:
    """A tool's result is not the engine's to choose: a NUL or a lone surrogate in it (and in
    the model's answer that repeats it) is kept as a visible escape, by the ledger, the
    model and the run alike; the run completes and the tool ran once."""
    ended = await _approved_and_resumed(engine, "notes", "hostile_agent")
    assert ended.status == "completed", ended
    assert ended.answer == f"The note says: {ESCAPED}\\u0000"
    [execution] = await engine.ledger.for_run(ended.id)
    assert execution.status == "succeeded"
    assert execution.result == ESCAPED
    assert (await engine.report(ended.id))["status"] == "completed"


async def test_a_tool_failing_with_hostile_bytes_is_told_to_the_model_escaped(
    engine: Engine,
) -> None:
    ended = await _approved_and_resumed(engine, "broken_notes", "failing_agent")
    assert ended.status == "completed", ended
    assert ended.answer is not None
    told = json.loads(ended.answer.removeprefix("The tool said: "))
    assert told["error"] == {"code": "tool_failed", "message": f"ValueError: {ESCAPED}"}
    [execution] = await engine.ledger.for_run(ended.id)
    assert execution.status == "failed"
    assert execution.error == f"ValueError: {ESCAPED}"


def coerced_script(text: str, outputs: dict[str, Any]) -> tuple[list[Any], str]:
    if "note-1" not in outputs:
        # A number where the tool takes a string: the SDK would run it as "1".
        return [("note-1", "fetch_note", {"note_id": 1})], ""
    return [], f"The tool said: {outputs['note-1']}"


def coerced_agent(deps: Any) -> Any:
    return hostile_agent(deps, coerced_script)


async def test_arguments_the_tools_schema_refuses_reach_no_policy_approver_or_tool(
    engine: Engine,
) -> None:
    """The SDK converts a call's arguments to the tool's types only to run it ("false" for a
    boolean runs as False): a policy and an approver judged the raw values (a rule on
    ``args.dry_run == false`` let a live refund through). Arguments the tool's schema refuses
    are the model's error now, before anything else."""
    engine.registry._entries["coerced_notes"] = (
        "tests.integration.test_attacks_openai:coerced_agent"
    )
    run = await engine.runner.start("coerced_notes", {"message": "read note 1"}, principal="alice")
    assert run.status == "completed", run
    assert await engine.requests.for_run(run.run_id) == []
    assert await engine.ledger.for_run(run.run_id) == []
    assert run.answer is not None
    told = json.loads(run.answer.removeprefix("The tool said: "))
    assert told["error"]["code"] == "invalid_arguments"
    assert told["error"]["errors"][0]["path"] == "note_id"
