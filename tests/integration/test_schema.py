"""The schema the migrations produce, against real PostgreSQL: it is the snapshot in
storage/sql/schema.sql, migration 0017 goes down and up again, and settlement keeps its rules
(a cancelled run is final, and the writer is told when its settlement is refused)."""

from __future__ import annotations

import asyncio
import difflib

import psycopg
import pytest
from alembic.config import Config

from alembic import command
from approvals.model import JobStatus, RunStatus
from approvals.ports import Settlement
from storage.migrate import alembic_config
from storage.schema import REGENERATE, SNAPSHOT, dump
from tests.integration.helpers import start_refund
from web.engine import Engine


async def test_the_migrations_produce_the_schema_snapshot(database_url: str) -> None:
    # database_url is a copy of a database `approvals db upgrade` just migrated.
    migrated = await dump(database_url)
    snapshot = SNAPSHOT.read_text(encoding="utf-8")
    if migrated != snapshot:
        diff = "".join(
            difflib.unified_diff(
                snapshot.splitlines(keepends=True),
                migrated.splitlines(keepends=True),
                fromfile="storage/sql/schema.sql (snapshot)",
                tofile="what the migrations produce",
            )
        )
        pytest.fail(
            f"the migrations no longer produce storage/sql/schema.sql; if the change is"
            f" intended, run `{REGENERATE}` and commit the file:\n{diff}"
        )


async def _alembic(config: Config, verb: str, revision: str) -> None:
    await asyncio.to_thread(getattr(command, verb), config, revision)


async def test_0017_goes_down_and_up_again(database_url: str) -> None:
    config = alembic_config(database_url)
    await _alembic(config, "downgrade", "0016")
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        names = {
            r[0]
            for r in await (
                await conn.execute("SELECT proname FROM pg_proc WHERE proname LIKE 'approvals%'")
            ).fetchall()
        }
    assert "approvals_settle_step" in names
    assert "approvals_grant_runtime" in names
    assert not any(name.endswith("_v1") for name in names)
    await _alembic(config, "upgrade", "head")
    assert await dump(database_url) == SNAPSHOT.read_text(encoding="utf-8")


async def test_every_lock_key_is_the_one_the_engine_always_used(engine: Engine) -> None:
    # Processes of the previous version hash the thread id the same way during an upgrade.
    async with engine.connection() as conn:
        row = await (
            await conn.execute(
                "SELECT approvals_thread_lock_key_v1('t-1') = hashtextextended('t-1', 7277) AS same"
            )
        ).fetchone()
    assert row is not None
    assert row["same"] is True


async def test_a_cancelled_run_refuses_a_settlement_and_the_writer_is_told(
    engine: Engine,
) -> None:
    # A worker claimed the job before the cancel could lock it: the cancel leaves it queued,
    # and the step that then settles the run finds it cancelled.
    run = await start_refund(engine)
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    async with engine.connection() as holder, holder.transaction():
        await holder.execute(
            "SELECT id FROM resume_queue WHERE run_id = %s FOR UPDATE", (run.run_id,)
        )
        await engine.operations.cancel(run.run_id, principal="ops", reason=None)
    async with engine.queue.claim() as claimed:
        assert claimed is not None
        await claimed.complete(
            JobStatus.DONE,
            settlement=Settlement(run_id=run.run_id, status=RunStatus.COMPLETED, answer="done"),
        )
        assert claimed.outcome == "refused"

    stored = await engine.runs.get(run.run_id)
    assert stored is not None
    assert stored.status is RunStatus.CANCELLED
    assert stored.answer is None
    events = await engine.audit.for_run(run.run_id)
    kinds = [e["kind"] for e in events]
    assert "run.completed" not in kinds
    refused = next(e for e in events if e["kind"] == "run.settle_refused")
    assert refused["data"]["status"] == "completed"
    assert refused["data"]["run_status"] == "cancelled"
    finished = next(e for e in events if e["kind"] == "resume.finished")
    assert finished["data"]["settled"] is False


async def test_a_settlement_to_a_run_not_cancelled_is_written(engine: Engine) -> None:
    run = await start_refund(engine)
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    async with engine.queue.claim() as claimed:
        assert claimed is not None
        await claimed.complete(
            JobStatus.DONE,
            settlement=Settlement(run_id=run.run_id, status=RunStatus.COMPLETED, answer="done"),
        )
        assert claimed.outcome == "settled"
    stored = await engine.runs.get(run.run_id)
    assert stored is not None
    assert (stored.status, stored.answer) == (RunStatus.COMPLETED, "done")
    kinds = [e["kind"] for e in await engine.audit.for_run(run.run_id)]
    assert "run.completed" in kinds
    assert "run.settle_refused" not in kinds


async def test_any_other_write_that_would_change_a_cancelled_run_fails_loudly(
    engine: Engine,
) -> None:
    run = await start_refund(engine)
    await engine.operations.cancel(run.run_id, principal="ops", reason=None)
    async with engine.connection() as conn:
        with pytest.raises(psycopg.errors.CheckViolation, match="was cancelled"):
            await conn.execute("UPDATE runs SET status = 'completed' WHERE id = %s", (run.run_id,))
    stored = await engine.runs.get(run.run_id)
    assert stored is not None
    assert stored.status is RunStatus.CANCELLED
