"""Lock-order attacks: a decision (the request's row FOR UPDATE, then rows referencing the run
and an audit entry, which takes the audit chain's head) against every other writer of the same
rows. Each test holds the decision's first lock open on one connection, starts the other
writer on a second, waits until it blocks, and then lets the decision go on: both must
commit (or the other writer must find the request consumed), never ``deadlock detected``."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from approvals.model import RunStatus
from approvals.ports import NewRequest
from storage.db import sql
from tests.integration.helpers import scalar, start_refund
from tests.waiting import eventually
from web.engine import Engine


async def _blocked(watcher: psycopg.AsyncConnection[dict[str, Any]], *, besides: int) -> None:
    """Wait until some backend other than ``besides`` waits for a lock."""

    async def waiting() -> int:
        row = await (
            await watcher.execute(
                "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND pid <> %s",
                (besides,),
            )
        ).fetchone()
        return 0 if row is None else int(row["n"])

    await eventually(waiting, what="a backend to wait for the decision's lock")


def _decision(request_id: str) -> dict[str, Any]:
    return {
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
    }


async def test_a_superseding_call_and_a_decision_on_the_old_request_both_finish(
    engine: Engine, database_url: str
) -> None:
    run = await start_refund(engine)
    old = await engine.requests.get(run.pending[0])
    assert old is not None
    changed = NewRequest(
        run_id=old.run_id,
        thread_id=old.thread_id,
        call_id=old.call_id,
        tool=old.tool,
        shown={**old.shown, "args": {**old.shown["args"], "amount": 1.0}},
        args_schema=old.args_schema,
        identity="jcs-sha256:" + "0" * 64,
        reason=old.reason,
        requested_by=old.requested_by,
        expires_at=datetime.now(UTC) + timedelta(hours=1),
    )
    connect = psycopg.AsyncConnection.connect
    async with (
        await connect(database_url, row_factory=dict_row) as decider,
        await connect(database_url, row_factory=dict_row, autocommit=True) as watcher,
    ):
        locked = await (await decider.execute(sql("lock_request_row"), {"id": old.id})).fetchone()
        assert locked is not None
        # The run's step records the changed call: it supersedes the old request, and waits
        # for the row the decision holds.
        opening = asyncio.create_task(engine.requests.open(changed))
        await _blocked(watcher, besides=decider.info.backend_pid)
        decided = await (await decider.execute(sql("decide"), _decision(old.id))).fetchone()
        assert decided is not None
        await decider.commit()
        new, _ = await asyncio.wait_for(opening, 10)
    assert new.id != old.id


async def test_a_cancel_arriving_during_a_decision_waits_and_both_commit(
    engine: Engine, database_url: str
) -> None:
    run = await start_refund(engine)
    request_id = run.pending[0]
    connect = psycopg.AsyncConnection.connect
    async with (
        await connect(database_url, row_factory=dict_row) as decider,
        await connect(database_url, row_factory=dict_row, autocommit=True) as watcher,
    ):
        locked = await (
            await decider.execute(sql("lock_request_row"), {"id": request_id})
        ).fetchone()
        assert locked is not None
        # The cancel takes the thread's lock and the run's row, then waits for the request.
        cancelling = asyncio.create_task(engine.cancel_run(run.run_id, by="ops"))
        await _blocked(watcher, besides=decider.info.backend_pid)
        # The decision goes on: its rows reference the run the cancel holds (no key lock).
        decided = await (await decider.execute(sql("decide"), _decision(request_id))).fetchone()
        assert decided is not None
        await decider.commit()
        cancelled = await asyncio.wait_for(cancelling, 10)
    # The request was consumed first: the cancel found nothing pending, and the worker skips
    # the decision's job because the run is cancelled.
    assert cancelled.requests == 0
    stored = await engine.requests.get(request_id)
    assert stored is not None
    assert stored.status == "approved"
    await engine.drain()
    ended = await engine.runs.get(run.run_id)
    assert ended is not None
    assert ended.status is RunStatus.CANCELLED


async def test_a_decision_arriving_during_a_cancel_waits_and_finds_it_cancelled(
    engine: Engine, database_url: str
) -> None:
    run = await start_refund(engine)
    request_id = run.pending[0]
    connect = psycopg.AsyncConnection.connect
    async with (
        await connect(database_url, row_factory=dict_row) as canceller,
        await connect(database_url, row_factory=dict_row) as decider,
        await connect(database_url, row_factory=dict_row, autocommit=True) as watcher,
    ):
        await canceller.execute(sql("lock_run_thread"), {"run_id": run.run_id})
        done = await (
            await canceller.execute(
                sql("cancel_run"),
                {"run_id": run.run_id, "principal": "ops", "reason": None, "error": "x"},
            )
        ).fetchone()
        assert done is not None
        deciding = asyncio.create_task(decider.execute(sql("lock_request_row"), {"id": request_id}))
        await _blocked(watcher, besides=canceller.info.backend_pid)
        await canceller.commit()
        locked = await (await asyncio.wait_for(deciding, 10)).fetchone()
        assert locked is not None
        assert locked["status"] == "cancelled"
        nothing = await (await decider.execute(sql("decide"), _decision(request_id))).fetchone()
        assert nothing is None
        await decider.commit()
    decisions = "SELECT count(*) FROM decisions WHERE request_id = %s"
    assert await scalar(engine, decisions, request_id) == 0


async def test_a_prune_waits_for_a_late_decision_on_a_decided_request_and_both_finish(
    engine: Engine, database_url: str
) -> None:
    """An approver's decision arrives after the request was decided and the run ended long
    ago: it holds the request's row while retention deletes the run. The prune waits, the late
    decision finds nothing to decide, then the prune deletes; no deadlock either way."""
    run = await start_refund(engine)
    request_id = run.pending[0]
    await engine.decide_as_operator(request_id, "approve", principal="bob")
    await engine.drain()
    async with engine.connection() as conn:
        await conn.execute(
            "UPDATE runs SET updated_at = now() - interval '400 days' WHERE id = %s",
            (run.run_id,),
        )
    connect = psycopg.AsyncConnection.connect
    async with (
        await connect(database_url, row_factory=dict_row) as decider,
        await connect(database_url, row_factory=dict_row, autocommit=True) as watcher,
    ):
        locked = await (
            await decider.execute(sql("lock_request_row"), {"id": request_id})
        ).fetchone()
        assert locked is not None
        assert locked["status"] == "approved"
        pruning = asyncio.create_task(engine.prune(timedelta(days=30), principal="ops"))
        await _blocked(watcher, besides=decider.info.backend_pid)
        late = await (await decider.execute(sql("decide"), _decision(request_id))).fetchone()
        assert late is None
        await decider.commit()
        pruned = await asyncio.wait_for(pruning, 10)
    assert pruned.runs == 1
    assert await engine.runs.get(run.run_id) is None
