"""A run's settlement and a decision on one of its requests never deadlock.

A step that ends locks its run's row, then writes each waiting request's interrupt id. A
decision locks the request's row, then inserts rows that reference the run (the decision, the
resume job): their foreign keys take a key-share lock on the run's row. The settlement used to
lock the run FOR UPDATE, which conflicts with key share: each waited for the other, and
PostgreSQL broke the cycle by failing one (a 503 on a run's start under load). It now locks FOR
NO KEY UPDATE, which a foreign key check does not wait for."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest
from psycopg.rows import dict_row

from storage.db import sql
from tests.integration.helpers import start_refund
from tests.waiting import eventually
from web.engine import Engine


async def _waiting_on_a_lock(admin: psycopg.AsyncConnection[dict[str, object]], pid: int) -> bool:
    row = await (
        await admin.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,))
    ).fetchone()
    return row is not None and row["wait_event_type"] == "Lock"


@pytest.mark.parametrize(
    "settle",
    [
        "approvals_settle_step_v2(%s, '[]', 'waiting', NULL, NULL,"
        " ARRAY[%s]::uuid[], ARRAY[%s]::text[])",
        "approvals_settle_step_v3(%s, '[]', 'waiting', NULL, NULL,"
        " ARRAY[%s]::uuid[], ARRAY[%s]::text[], '[]')",
        # What the engine calls now: v3 that refuses to settle any run that ended.
        "approvals_settle_step_v4(%s, '[]', 'waiting', NULL, NULL,"
        " ARRAY[%s]::uuid[], ARRAY[%s]::text[], '[]')",
    ],
)
async def test_a_settlement_and_a_decision_on_its_request_both_commit(
    engine: Engine, database_url: str, settle: str
) -> None:
    run = await start_refund(engine)
    request_id = run.pending[0]
    connect = psycopg.AsyncConnection.connect
    async with (
        await connect(database_url, row_factory=dict_row) as decider,
        await connect(database_url, row_factory=dict_row, autocommit=True) as settler,
        await connect(database_url, row_factory=dict_row, autocommit=True) as watcher,
    ):
        # The decision's transaction holds the request's row lock first, as engine.decide does.
        locked = await (
            await decider.execute(sql("lock_request_row"), {"id": request_id})
        ).fetchone()
        assert locked is not None
        # The step's end locks the run, then waits for the request's row.
        settling = asyncio.create_task(
            settler.execute(
                f"SELECT {settle} AS outcome",
                (run.run_id, request_id, "interrupt-x"),
            )
        )
        await eventually(
            lambda: _waiting_on_a_lock(watcher, settler.info.backend_pid),
            what="the settlement to wait for the request's row",
        )
        # The decision references the run: with FOR UPDATE on the run this was a deadlock.
        decided = await (
            await decider.execute(
                sql("decide"),
                {
                    "status": "approved",
                    "request_id": request_id,
                    "kind": "approve",
                    "quorum_met": True,
                    "id": str(uuid.uuid4()),
                    "principal": "local:bob",
                    "reason": None,
                    "args": None,
                    "args_identity": None,
                    "override_by": None,
                },
            )
        ).fetchone()
        assert decided is not None
        await decider.commit()
        settled = await (await asyncio.wait_for(settling, 10)).fetchone()
        assert settled is not None
        assert settled["outcome"] == "settled"
    stored = await engine.requests.get(request_id)
    assert stored is not None
    assert stored.status == "approved"
    assert stored.interrupt_id == "interrupt-x"
