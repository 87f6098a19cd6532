"""Attacks on OpenAI-SDK runs through their stored state: an insider who can write every state
table replaces a paused run's ``RunState`` with JSON the SDK reads as valid but that names
another agent (or is no state at all), and rewrites every version to match. Nothing may run,
the run must fail visibly with the audit log saying why, and the worker must not retry the
job forever."""

from __future__ import annotations

import json
from typing import Any

import pytest

from graphs.openai_host.runner import state_version
from tests.integration.helpers import scalar, side_effects
from tests.integration.test_openai_runs import start, stored_state
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
    async with engine.connection() as conn:
        await conn.execute(
            "UPDATE openai_run_states SET state = %s, version = %s WHERE run_id = %s",
            (forged, state_version(forged), run.run_id),
        )
        await conn.execute(
            "UPDATE approval_requests SET state_version = %s WHERE run_id = %s",
            (state_version(forged), run.run_id),
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
    refused = await scalar(
        engine,
        "SELECT count(*) FROM audit_events WHERE kind = 'run.state_tampered' AND run_id = %s",
        run.run_id,
    )
    assert refused == 1
