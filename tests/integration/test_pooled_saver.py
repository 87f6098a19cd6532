"""The engine's checkpointer (storage.checkpoints.PooledSaver): LangGraph's Postgres saver on
the engine's pool without the saver's single lock, so that one run's checkpoint writes never
queue behind another's."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

from storage.checkpoints import PooledSaver
from tests.integration.helpers import until
from web.engine import Engine


def config(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


async def test_a_blocked_write_does_not_hold_up_another_threads_checkpoint(
    engine: Engine,
) -> None:
    """A write of thread A waits on a row another transaction holds; meanwhile a checkpoint of
    thread B is written and read back. (LangGraph's own saver takes one lock around every
    operation: B's checkpoint waited until A's write was done.)"""
    saver = engine.registry.get("refund").checkpointer
    assert isinstance(saver, PooledSaver)
    async with engine.connection() as holder:
        await holder.execute("BEGIN")
        # The very row A's write will insert, uncommitted: A's insert waits for this
        # transaction to end.
        await holder.execute(
            "INSERT INTO checkpoint_writes"
            " (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type,"
            " blob) VALUES ('thread-a', '', 'cp-a', 'task-a', '', 0, 'held', 'null', '')"
        )
        blocked = asyncio.create_task(
            saver.aput_writes(config("thread-a", "cp-a"), [("answer", 42)], "task-a")
        )
        await until(
            engine,
            "select count(*) > 0 from pg_locks where not granted and locktype = 'transactionid'"
            " and pid in (select pid from pg_stat_activity"
            "             where datname = current_database())",
        )
        checkpoint = empty_checkpoint()
        stored = await asyncio.wait_for(
            saver.aput(config("thread-b"), checkpoint, {"source": "input", "step": -1}, {}), 30
        )
        found = await saver.aget_tuple(stored)
        assert found is not None
        assert found.checkpoint["id"] == checkpoint["id"]
        assert not blocked.done()
        await holder.execute("ROLLBACK")
    await asyncio.wait_for(blocked, 30)
    written = await saver.aget_tuple(config("thread-a", "cp-a"))
    assert written is None  # writes of a checkpoint never put: there is no tuple to read
    async with engine.connection() as conn:
        rows = await (
            await conn.execute("SELECT channel FROM checkpoint_writes WHERE thread_id = 'thread-a'")
        ).fetchall()
    assert [r["channel"] for r in rows] == ["answer"]


async def test_without_pipeline_mode_the_saver_still_stores_and_reads_back(
    engine: Engine,
) -> None:
    """On a libpq without pipeline mode the saver's multi-statement operations (a checkpoint's
    blobs and row) run in a transaction instead, as LangGraph's own saver does; what is written
    reads back the same."""
    saver = PooledSaver(engine._db.pool)
    saver.supports_pipeline = False
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": ["a blob, not an inline value"]}
    checkpoint["channel_versions"] = {"messages": "1"}
    stored = await saver.aput(
        config("thread-c"), checkpoint, {"source": "input", "step": -1}, {"messages": "1"}
    )
    await saver.aput_writes(stored, [("answer", 42)], "task-c")
    found = await saver.aget_tuple(stored)
    assert found is not None
    assert found.checkpoint["channel_values"] == {"messages": ["a blob, not an inline value"]}
    assert [(w[1], w[2]) for w in found.pending_writes or []] == [("answer", 42)]
