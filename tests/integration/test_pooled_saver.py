"""The engine's checkpointer (storage.checkpoints.PooledSaver): LangGraph's Postgres saver on
the engine's pool without the saver's single lock, so that one run's checkpoint writes never
queue behind another's."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from approvals.model import ResumeJob
from storage.checkpoints import PgResumeChecks, PooledSaver, forget_known, new_thread
from tests.integration.helpers import side_effects, start_refund, until
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


async def stored_rows(engine: Engine, thread_id: str) -> dict[str, list[tuple[Any, ...]]]:
    """What a thread's checkpoints left in LangGraph's three tables, thread id left out."""
    queries = {
        "checkpoints": "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, type,"
        " checkpoint, metadata FROM checkpoints WHERE thread_id = %s ORDER BY checkpoint_id",
        "checkpoint_blobs": "SELECT checkpoint_ns, channel, version, type, blob"
        " FROM checkpoint_blobs WHERE thread_id = %s ORDER BY channel, version",
        "checkpoint_writes": "SELECT checkpoint_ns, checkpoint_id, task_id, task_path, idx,"
        " channel, type, blob FROM checkpoint_writes WHERE thread_id = %s"
        " ORDER BY checkpoint_id, task_id, idx",
    }
    out: dict[str, list[tuple[Any, ...]]] = {}
    async with engine.connection() as conn:
        for table, sql in queries.items():
            rows = await (await conn.execute(sql, (thread_id,))).fetchall()
            out[table] = [tuple(r.values()) for r in rows]
    return out


async def test_checkpoints_and_writes_are_stored_as_the_stock_saver_stores_them(
    engine: Engine,
) -> None:
    """PooledSaver serializes on the loop with its own aput/aput_writes: the same calls through
    it and through LangGraph's AsyncPostgresSaver leave the same rows, byte for byte, and read
    back the same: inline primitives, blobs, a delta snapshot, a parent link, the metadata,
    writes to ordinary channels (kept as first written) and to special ones (replaced)."""
    ours = PooledSaver(engine._db.pool)
    stock = AsyncPostgresSaver(engine._db.pool)

    async def script(saver: AsyncPostgresSaver, thread_id: str) -> list[Any]:
        first = empty_checkpoint()
        first["id"] = "1ef00000-0000-6000-8000-000000000001"
        first["ts"] = "2026-12-01T00:00:00+00:00"
        first["channel_values"] = {"count": 3, "flag": True, "none": None, "text": "inline"}
        first["channel_versions"] = {"count": "1", "flag": "1", "none": "1", "text": "1"}
        one = await saver.aput(config(thread_id), first, {"source": "input", "step": -1}, {})
        second = empty_checkpoint()
        second["id"] = "1ef00000-0000-6000-8000-000000000002"
        second["ts"] = "2026-12-01T00:00:01+00:00"
        second["channel_values"] = {
            "count": 4,
            "messages": [{"role": "user", "content": "refund \u00e9 1001"}],
            "history": _DeltaSnapshot(["a", "b"]),
            "nested": {"a": [1, 2.5, None]},
        }
        second["channel_versions"] = {"count": "2", "messages": "1", "history": "1", "nested": "1"}
        two = await saver.aput(
            one,
            second,
            {"source": "loop", "step": 0, "parents": {}},
            {"count": "2", "messages": "1", "history": "1", "nested": "1"},
        )
        await saver.aput_writes(two, [("messages", ["first"]), ("count", 5)], "task-1", "p")
        await saver.aput_writes(two, [("messages", ["second try"])], "task-1", "p")
        await saver.aput_writes(two, [("__interrupt__", {"value": 1})], "task-2")
        await saver.aput_writes(two, [("__interrupt__", {"value": 2})], "task-2")
        # Special and ordinary channels in one call: kept as first written, as a whole.
        await saver.aput_writes(two, [("__error__", "e1"), ("answer", 1)], "task-3")
        await saver.aput_writes(two, [("__error__", "e2"), ("answer", 2)], "task-3")
        found = [await saver.aget_tuple(one), await saver.aget_tuple(two)]
        return [(t.checkpoint, t.metadata, t.pending_writes) for t in found if t is not None]

    ours_read = await script(ours, "thread-ours")
    stock_read = await script(stock, "thread-stock")
    assert len(ours_read) == 2
    assert ours_read == stock_read
    ours_rows = await stored_rows(engine, "thread-ours")
    assert ours_rows == await stored_rows(engine, "thread-stock")
    # What the comparison covers is really there.
    assert len(ours_rows["checkpoints"]) == 2
    assert {r[1] for r in ours_rows["checkpoint_blobs"]} == {"messages", "history", "nested"}
    writes = {(r[2], r[5]): r for r in ours_rows["checkpoint_writes"]}
    assert len(writes) == 5
    # The special channel's write was replaced, the ordinary channel's kept as first written.
    pending = {(task, channel): value for task, channel, value in ours_read[1][2]}
    assert pending[("task-2", "__interrupt__")] == {"value": 2}
    assert pending[("task-1", "messages")] == ["first"]
    assert pending[("task-3", "__error__")] == "e1"


def counting_reads(monkeypatch: Any) -> list[str]:
    """The thread of every checkpoint read that reached the database."""
    reads: list[str] = []
    original = AsyncPostgresSaver.aget_tuple

    async def counted(self: AsyncPostgresSaver, config: RunnableConfig) -> Any:
        reads.append(config["configurable"]["thread_id"])
        return await original(self, config)

    monkeypatch.setattr(AsyncPostgresSaver, "aget_tuple", counted)
    return reads


async def test_a_new_threads_latest_checkpoint_is_none_until_something_is_written(
    engine: Engine, monkeypatch: Any
) -> None:
    """Within ``new_thread``, the thread's latest checkpoint is none without a query, until a
    checkpoint or a write is stored on it: from then on, and for any other thread, namespace
    or checkpoint id, the saver reads the database."""
    saver = PooledSaver(engine._db.pool)
    reads = counting_reads(monkeypatch)
    for write in ("checkpoint", "writes"):
        thread = f"thread-new-{write}"
        with new_thread(thread):
            assert await saver.aget_tuple(config(thread)) is None
            assert await saver.aget_tuple(config(thread)) is None
            assert reads == []
            assert await saver.aget_tuple(config("another-thread")) is None
            assert (
                await saver.aget_tuple(config(thread, "1ef00000-0000-6000-8000-00000000000a"))
                is None
            )
            sub: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": "sub"}}
            assert await saver.aget_tuple(sub) is None
            assert reads == ["another-thread", thread, thread]
            reads.clear()
            checkpoint = empty_checkpoint()
            stored = await saver.aput(
                config(thread), checkpoint, {"source": "input", "step": -1}, {}
            )
            if write == "writes":
                await saver.aput_writes(stored, [("answer", 42)], "task-1")
            found = await saver.aget_tuple(config(thread))
            assert found is not None
            assert found.checkpoint["id"] == checkpoint["id"]
            assert reads == [thread]
            if write == "writes":
                assert [(w[1], w[2]) for w in found.pending_writes or []] == [("answer", 42)]
        reads.clear()
    # Once the context ends, a thread it named is read again, written on or not.
    with new_thread("thread-left"):
        pass
    assert await saver.aget_tuple(config("thread-left")) is None
    assert reads == ["thread-left"]


async def test_a_run_on_a_thread_made_up_for_it_does_not_read_it_before_its_first_step(
    engine: Engine, monkeypatch: Any
) -> None:
    """The runner's own thread id is new: the start asks the database nothing about its
    checkpoints before writing the first one; the paused run reads back as paused. A start
    on a thread the caller names still reads it (it may hold a conversation)."""
    reads = counting_reads(monkeypatch)
    graph = engine.registry.get("refund")
    run = await engine.runner.start("refund", {"message": "refund 1001"}, principal="alice")
    assert run.status.value == "waiting"
    assert run.thread_id not in reads
    state = await graph.aget_state({"configurable": {"thread_id": run.thread_id}})
    assert state.next
    assert state.tasks[0].interrupts
    assert reads.count(run.thread_id) >= 1  # after the start: read from the database
    named = await engine.runner.start(
        "refund", {"message": "refund 1001"}, principal="alice", thread_id="thread-named"
    )
    assert named.status.value == "waiting"
    # Once under the lock to see whether it waits, once as LangGraph's first step loads it.
    assert reads.count("thread-named") >= 2


def checkpoint_traffic(monkeypatch: Any) -> list[tuple[str, str]]:
    """(operation, thread) of every checkpoint read that reached the database and of every
    write, in order."""
    seen: list[tuple[str, str]] = []
    read, put, put_writes = (
        AsyncPostgresSaver.aget_tuple,
        PooledSaver.aput,
        PooledSaver.aput_writes,
    )

    async def counted_read(self: AsyncPostgresSaver, config: RunnableConfig) -> Any:
        seen.append(("read", config["configurable"]["thread_id"]))
        return await read(self, config)

    async def counted_put(self: PooledSaver, config: RunnableConfig, *args: Any) -> Any:
        seen.append(("write", config["configurable"]["thread_id"]))
        return await put(self, config, *args)

    async def counted_writes(self: PooledSaver, config: RunnableConfig, *args: Any) -> Any:
        seen.append(("write", config["configurable"]["thread_id"]))
        return await put_writes(self, config, *args)

    monkeypatch.setattr(AsyncPostgresSaver, "aget_tuple", counted_read)
    monkeypatch.setattr(PooledSaver, "aput", counted_put)
    monkeypatch.setattr(PooledSaver, "aput_writes", counted_writes)
    return seen


async def test_a_resume_loads_the_checkpoint_its_check_read_and_then_reads_again(
    engine: Engine, monkeypatch: Any
) -> None:
    """The resume's check reads the thread's latest checkpoint with its own statement (one
    round trip); the graph's first step loads it from there, not from another query. What
    the graph then writes is read back from the database: the run completes, the tool once."""
    run = await start_refund(engine)
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    traffic = checkpoint_traffic(monkeypatch)
    assert await engine.worker.process_one()
    ours = [op for op, thread in traffic if thread == run.thread_id]
    assert ours[0] == "write", ours  # no read of the thread before the resumed step's write
    assert "write" in ours
    state = await engine.registry.get("refund").aget_state(
        {"configurable": {"thread_id": run.thread_id}}
    )
    assert not state.next
    assert str(state.values["messages"][-1].content).startswith("Refunded")
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1
    assert traffic[-1] == ("read", run.thread_id)  # the state above: from the database


async def decided(engine: Engine, message: str = "refund 1001") -> tuple[Any, PooledSaver, Any]:
    """A paused refund run whose requests are approved (its jobs queued), the engine's saver,
    and resume checks on it."""
    saver = engine.registry.get("refund").checkpointer
    assert isinstance(saver, PooledSaver)
    run = await start_refund(engine, message)
    for request_id in run.pending:
        await engine.decide_as_operator(request_id, "approve", principal="bob")
    return run, saver, PgResumeChecks(engine._db, saver.serde)


async def test_what_the_check_read_is_used_once_and_never_past_a_write_or_the_claim(
    engine: Engine, monkeypatch: Any
) -> None:
    """What the resume's check read of a thread stands for its latest checkpoint only until
    the first write on the thread, the first load of it, or the end of the claim; another
    thread, namespace or checkpoint id is always read from the database."""
    run, saver, checks = await decided(engine)
    async with engine.queue.claim() as claimed:
        assert claimed is not None
        traffic = checkpoint_traffic(monkeypatch)
        await checks.begin(claimed.job)
        sub: RunnableConfig = {"configurable": {"thread_id": run.thread_id, "checkpoint_ns": "x"}}
        assert await saver.aget_tuple(sub) is None
        first = await saver.aget_tuple(config(run.thread_id))
        assert traffic == [("read", run.thread_id)]  # the namespace's; the first load: none
        again = await saver.aget_tuple(config(run.thread_id))
        assert traffic == [("read", run.thread_id)] * 2  # handed out once: now read
        assert first is not None
        assert again is not None
        assert first.checkpoint == again.checkpoint
        assert first.pending_writes == again.pending_writes
        assert first.config == again.config
        assert first.metadata == again.metadata
        # Read again, then written on: the next load goes to the database.
        await checks.begin(claimed.job)
        await saver.aput_writes(first.config, [("marker", 1)], "task-test")
        traffic.clear()
        written = await saver.aget_tuple(config(run.thread_id))
        assert traffic == [("read", run.thread_id)]
        assert written is not None
        assert ("task-test", "marker", 1) in [tuple(w) for w in written.pending_writes or []]
        await checks.begin(claimed.job)
        traffic.clear()
    # The claim ended (rolled back here: the job stays queued): read from the database.
    await saver.aget_tuple(config(run.thread_id))
    assert traffic == [("read", run.thread_id)]
    forget_known()  # harmless when nothing is known


async def test_without_pipeline_mode_the_check_and_the_read_still_go_together(
    engine: Engine, monkeypatch: Any
) -> None:
    """On a libpq without pipeline mode the resume check and the checkpoint read run one after
    the other on one connection; the step's load is still the check's read, and reads back the
    same as the database's."""
    monkeypatch.setattr(psycopg.Pipeline, "is_supported", classmethod(lambda cls: False))
    run, saver, checks = await decided(engine)
    async with engine.queue.claim() as claimed:
        assert claimed is not None
        traffic = checkpoint_traffic(monkeypatch)
        check = await checks.begin(claimed.job)
        assert check.interrupt_id is not None
        known = await saver.aget_tuple(config(run.thread_id))
        assert traffic == []
        read = await saver.aget_tuple(config(run.thread_id))
        assert traffic == [("read", run.thread_id)]
        assert known is not None
        assert read is not None
        assert (known.checkpoint, known.pending_writes) == (read.checkpoint, read.pending_writes)


async def test_what_a_context_knew_is_forgotten_when_it_learns_something_else(
    engine: Engine,
) -> None:
    """A task made while the resume check's row was known shares that knowledge; when the
    context then learns about another thread, the row is forgotten for that task too, so it
    reads what later steps wrote (found by an attack: it kept the stale row)."""
    run, saver, checks = await decided(engine, "Refund orders 1001 and 1002")
    go = asyncio.Event()

    async def later_reader() -> Any:
        await go.wait()
        return await saver.aget_tuple(config(run.thread_id))

    async with engine.queue.claim() as claimed:
        assert claimed is not None
        await checks.begin(claimed.job)
        reader = asyncio.create_task(later_reader())
        with new_thread("another-thread"):
            pass
    assert await engine.worker.process_one()  # new checkpoints on the thread
    go.set()
    seen = await reader
    latest = await AsyncPostgresSaver.aget_tuple(saver, config(run.thread_id))
    assert seen is not None
    assert latest is not None
    assert seen.checkpoint["id"] == latest.checkpoint["id"]


async def test_the_check_finds_the_interrupt_waiting_on_its_own_request(engine: Engine) -> None:
    """Of the interrupts the latest checkpoint waits on (one per paused call), the check names
    the one whose payload names the job's request, for each job."""
    run, saver, checks = await decided(engine, "Refund orders 1001 and 1002")
    state = await saver.aget_tuple(config(run.thread_id))
    assert state is not None
    waiting = {
        value.value["request_id"]: value.id
        for _task, channel, value in state.pending_writes or []
        if channel == "__interrupt__"
        for value in (value if isinstance(value, list | tuple) else [value])
    }
    assert len(waiting) == 2
    found = {}
    async with engine.queue.claim() as claimed:
        assert claimed is not None
        found[claimed.job.request_id] = (await checks.begin(claimed.job)).interrupt_id
        # The other job, checked under the thread's lock this claim holds.
        async with engine.connection() as conn:
            row = await (
                await conn.execute(
                    "SELECT q.*, r.graph, a.call_id FROM resume_queue q"
                    " JOIN runs r ON r.id = q.run_id"
                    " JOIN approval_requests a ON a.id = q.request_id WHERE q.id <> %s",
                    (claimed.job.id,),
                )
            ).fetchone()
        assert row is not None
        other = ResumeJob.from_row(row)
        found[other.request_id] = (await checks.begin(other)).interrupt_id
    assert found == waiting


HOSTILE: dict[str, dict[str, Any]] = {
    "NaN inline": {"x": float("nan")},
    "lone surrogate inline": {"s": "\ud800"},
    "lone surrogate in a blob": {"m": ["\ud800"]},
    "NUL inline": {"s": "a\x00b"},
    "NUL in a blob": {"m": ["a\x00b"]},
}


async def test_hostile_values_meet_the_same_fate_as_with_the_stock_saver(engine: Engine) -> None:
    """NaN, lone surrogates and NUL in a checkpoint's values: refused with the same error, or
    stored and read back the same, through PooledSaver (serializing on the loop) as through
    LangGraph's saver (serializing in a thread). The engine refuses such input at its edges
    (check_inputs); this is what reaches the saver from a graph's own code."""
    fates: dict[str, list[Any]] = {}
    for name, saver in (
        ("stock", AsyncPostgresSaver(engine._db.pool)),
        ("ours", PooledSaver(engine._db.pool)),
    ):
        for label, values in HOSTILE.items():
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = values
            checkpoint["channel_versions"] = {k: "1" for k in values}
            where = config(f"{name}: {label}")
            try:
                await saver.aput(where, checkpoint, {"source": "input", "step": -1}, {"m": "1"})
            except Exception as exc:
                fates.setdefault(label, []).append(type(exc).__name__)
                continue
            found = await saver.aget_tuple(where)
            assert found is not None
            fates.setdefault(label, []).append(found.checkpoint["channel_values"])
    assert all(len(f) == 2 and f[0] == f[1] for f in fates.values()), fates
    # Both refusals and stored values are among what was compared.
    assert fates["NaN inline"][0] == "InvalidTextRepresentation"
    assert fates["NUL in a blob"][0] == {"m": ["a\x00b"]}
