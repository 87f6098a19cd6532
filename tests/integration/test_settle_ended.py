"""A run that ended stays as it ended: a later settlement (a resume job that failed after an
earlier job completed the run, a step that ends after a cancel) is refused and audited, and the
step's interception records are kept all the same (``approvals_settle_step_v4``)."""

from __future__ import annotations

import json

import pytest

from tests.integration.helpers import scalar, start_refund
from web.engine import Engine

RECORD = {
    "session_id": "s-1",
    "sequence": 1,
    "point": "post_tool_call",
    "decision": "allow",
    "reason": None,
    "interceptor": "policy",
    "mode": "sequential",
    "input_identity": "jcs-sha256:0",
    "enforced_identity": "jcs-sha256:0",
    "resolved_by": None,
    "record": {},
}


async def _settle(engine: Engine, run_id: str, status: str) -> str:
    outcome: str = await scalar(
        engine,
        "SELECT approvals_settle_step_v4(%s, %s::jsonb, %s, 'a late step', NULL,"
        " '{}'::uuid[], '{}'::text[], '[]') AS outcome",
        run_id,
        json.dumps([RECORD]),
        status,
    )
    return outcome


async def _end(engine: Engine, run_id: str, status: str) -> None:
    await scalar(engine, "UPDATE runs SET status = %s WHERE id = %s RETURNING id", status, run_id)


@pytest.mark.parametrize("ended", ["completed", "blocked", "failed", "cancelled"])
@pytest.mark.parametrize("late", ["failed", "completed", "waiting"])
async def test_a_run_that_ended_is_not_settled_again(engine: Engine, ended: str, late: str) -> None:
    run = await start_refund(engine)
    await _end(engine, run.run_id, ended)
    if late == ended:
        late = "waiting"
    assert await _settle(engine, run.run_id, late) == "refused"
    stored = await engine.runs.get(run.run_id)
    assert stored is not None
    assert (stored.status, stored.error) == (ended, None)
    refused = await scalar(
        engine,
        "SELECT data FROM audit_events WHERE run_id = %s AND kind = 'run.settle_refused'",
        run.run_id,
    )
    assert (refused["status"], refused["run_status"]) == (late, ended)
    # The step's records are kept: what the interceptors decided is never lost.
    kept = await scalar(
        engine,
        "SELECT count(*) FROM interception_records WHERE run_id = %s AND session_id = 's-1'",
        run.run_id,
    )
    assert kept == 1
    assert (await engine.audit.verify()).ok


async def test_a_waiting_run_is_settled_and_a_cancel_over_its_cancellation_is_taken(
    engine: Engine,
) -> None:
    run = await start_refund(engine)
    assert await _settle(engine, run.run_id, "failed") == "settled"
    stored = await engine.runs.get(run.run_id)
    assert stored is not None
    assert (stored.status, stored.error) == ("failed", "a late step")

    other = await start_refund(engine, "refund 1002")
    await _end(engine, other.run_id, "cancelled")
    assert await _settle(engine, other.run_id, "cancelled") == "settled"
