"""LangGraph's checkpointer on the engine's pool, and a light read of what a thread waits on."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from psycopg import AsyncCursor
from psycopg.rows import DictRow, dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from approvals.model import (
    DECIDED_STATUSES,
    DecisionRecord,
    PendingCall,
    ResumeCheck,
    ResumeJob,
    RunStatus,
)
from storage.db import Connection, Database, Row, sql
from storage.requests import joined_decision


class _Known:
    """What the saver knows of a thread's latest checkpoint without asking the database: that
    there is none (a thread made up for its run), or the row the resume's check read with it.
    Good until something is written on the thread, or the run's lease or the job's claim (the
    thread's lock) ends; a row is handed out once (a tuple is built from it, and LangGraph's
    loop is free to change what it was given)."""

    __slots__ = ("row", "thread_id")

    def __init__(self, thread_id: str, row: DictRow | None) -> None:
        self.thread_id: str | None = thread_id
        self.row = row

    def forget(self) -> None:
        self.thread_id = None
        self.row = None


_known: ContextVar[_Known | None] = ContextVar("approvals_known_checkpoint", default=None)


def _know(thread_id: str, row: DictRow | None) -> _Known:
    # What the context knew before is forgotten, not only replaced: a task made meanwhile
    # holds the old holder too, and no claim or lease would forget it for that task.
    forget_known()
    known = _Known(thread_id, row)
    _known.set(known)
    return known


def forget_known() -> None:
    """Whatever this context knew of a thread's latest checkpoint is to be read again (the
    thread's lock is being released). Forgetting is always safe: it only costs a query."""
    known = _known.get()
    if known is not None:
        known.forget()


@contextmanager
def new_thread(thread_id: str) -> Iterator[None]:
    """While a run holds the lock of a thread made up for it (its own fresh id): until the first
    write on the thread, the saver knows its latest checkpoint is none, and says so without a
    query (a round trip less at every start; LangGraph reads it before the first step)."""
    known = _know(thread_id, None)
    try:
        yield
    finally:
        # Not reset to the previous value: an async generator's finally may run in another
        # context. The mark is dead from here on, whatever still sees it.
        known.forget()


def _written(thread_id: str) -> None:
    known = _known.get()
    if known is not None and known.thread_id == thread_id:
        known.forget()


#: The saver's read of a thread's latest checkpoint (``AsyncPostgresSaver.aget_tuple``'s query
#: without a checkpoint id), to be sent with the resume's check.
LATEST_CHECKPOINT = (
    AsyncPostgresSaver.SELECT_SQL
    + "WHERE thread_id = %s AND checkpoint_ns = %s ORDER BY checkpoint_id DESC LIMIT 1"
)


class PooledSaver(AsyncPostgresSaver):
    """LangGraph's Postgres saver on a pool, without the saver's one lock.

    ``AsyncPostgresSaver`` takes one ``asyncio.Lock`` around every operation, held from taking
    a connection to the end of its statements: it serves a single shared connection too, which
    one coroutine at a time may use. On a pool every operation has a connection of its own, so
    the lock only queued the whole process's checkpoint writes behind each other (16 runs
    stepping at once waited on one lock, and a step's background writes held up its own
    checkpoint). Here each operation takes its own pooled connection and nothing else: the same
    statements, in the same pipeline per operation. What must follow what still does:
    LangGraph chains each checkpoint after the previous one and, with ``durability="sync"``,
    waits for it before the next step; a step's writes are its own rows, keyed by checkpoint
    and task.

    ``aput`` and ``aput_writes`` also serialize on the event loop, where LangGraph's hand the
    serializer to a thread (``asyncio.to_thread``) and wait for it: a thread hop costs about
    0.1-0.2 ms here, ten a cycle, and buys little, since the serializer holds the GIL while it
    runs (the loop could only interleave at the interpreter's switch interval; serializing
    takes about 4 ms a MB of messages here, 9 ms for a 2,000-message conversation, while
    LangGraph's own step bookkeeping on the loop is already proportional to the state). They
    write the same rows with the same statements (tests/integration/test_pooled_saver.py
    compares them with the stock saver's, row for row).

    ``aget_tuple`` answers two reads without a query, both while the thread's lock is held and
    only until something is written on the thread (``_Known``): the latest checkpoint of a
    thread the runner just made up is none (``new_thread``), and a resume's first step gets the
    row the resume check read with its own statement (``PgResumeChecks``), once."""

    def __init__(self, pool: AsyncConnectionPool[Connection]) -> None:
        super().__init__(pool)
        self._pool = pool

    @asynccontextmanager
    async def _cursor(self, *, pipeline: bool = False) -> AsyncIterator[AsyncCursor[DictRow]]:
        async with self._pool.connection() as conn, AsyncExitStack() as stack:
            if pipeline:
                # One pipeline; on a libpq without pipeline mode, one transaction.
                await stack.enter_async_context(
                    conn.pipeline() if self.supports_pipeline else conn.transaction()
                )
            async with conn.cursor(binary=True, row_factory=dict_row) as cur:
                yield cur

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = config["configurable"]
        known = _known.get()
        if (
            known is not None
            and known.thread_id is not None
            and configurable.get("thread_id") == known.thread_id
            and not configurable.get("checkpoint_ns")
            and not get_checkpoint_id(config)
        ):
            row = known.row
            if row is None:
                return None  # new_thread: nothing was written on it yet
            known.forget()
            # A checkpoint from before LangGraph's format 4 needs its parent's pending sends
            # moved into it, which the saver's own read does.
            if row["checkpoint"].get("v", 4) >= 4 or not row["parent_checkpoint_id"]:
                return await self._load_checkpoint_tuple(row)
        return await super().aget_tuple(config)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config["configurable"]
        thread_id, checkpoint_ns = configurable["thread_id"], configurable["checkpoint_ns"]
        _written(thread_id)
        # Primitive values stay inline in the checkpoint row; the rest become blobs (a delta
        # snapshot leaves ``True`` inline, so that a reader knows to look for its blob).
        inline = dict(checkpoint["channel_values"])
        blobs: dict[str, Any] = {}
        for key, value in checkpoint["channel_values"].items():
            if isinstance(value, _DeltaSnapshot):
                blobs[key] = inline.pop(key)
                inline[key] = True
            elif not (value is None or isinstance(value, (str, int, float, bool))):
                blobs[key] = inline.pop(key)
        row = {**checkpoint, "channel_values": inline}
        async with self._cursor(pipeline=True) as cur:
            if versions := {k: v for k, v in new_versions.items() if k in blobs}:
                await cur.executemany(
                    self.UPSERT_CHECKPOINT_BLOBS_SQL,
                    self._dump_blobs(thread_id, checkpoint_ns, blobs, versions),
                )
            await cur.execute(
                self.UPSERT_CHECKPOINTS_SQL,
                (
                    thread_id,
                    checkpoint_ns,
                    checkpoint["id"],
                    configurable.get("checkpoint_id"),
                    Jsonb(row),
                    Jsonb(get_serializable_checkpoint_metadata(config, metadata)),
                ),
            )
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        configurable = config["configurable"]
        _written(configurable["thread_id"])
        # A call whose writes all go to special channels (errors, interrupts, ...) replaces an
        # earlier attempt's; any other call's writes, mixed ones included, stay as first written.
        query = (
            self.UPSERT_CHECKPOINT_WRITES_SQL
            if all(channel in WRITES_IDX_MAP for channel, _ in writes)
            else self.INSERT_CHECKPOINT_WRITES_SQL
        )
        params = self._dump_writes(
            configurable["thread_id"],
            configurable["checkpoint_ns"],
            configurable["checkpoint_id"],
            task_id,
            task_path,
            writes,
        )
        async with self._cursor(pipeline=True) as cur:
            await cur.executemany(query, params)


def make_saver(pool: AsyncConnectionPool[Connection]) -> AsyncPostgresSaver:
    """The saver, sharing the engine's pool (configured as it requires)."""
    return PooledSaver(pool)


class PgResumeChecks:
    """A resume's start under the thread's lock (``begin_resume``): its audit event and what it
    re-reads, interrupts decoded with the saver's serializer."""

    def __init__(self, db: Database, serde: SerializerProtocol) -> None:
        self._db = db
        self._serde = serde

    async def begin(self, job: ResumeJob) -> ResumeCheck:
        params = {"job": job.id, "run_id": job.run_id, "request_id": job.request_id}
        row, latest = await self._begin_and_read_latest(params, job.thread_id)
        if row is None:  # the statement returns one row whatever exists
            raise RuntimeError("begin_resume returned no row")
        _know(job.thread_id, latest)
        return ResumeCheck(
            run_status=RunStatus(row["run_status"]) if row["run_status"] else None,
            interrupt_id=self._waiting_on(latest, job.request_id),
            next_sequence=int(row["next_sequence"]),
            started_by=row["started_by"] or "",
            run_input=row["input"] if isinstance(row["input"], dict) else {},
            decided=_decided(row),
        )

    async def _begin_and_read_latest(
        self, params: dict[str, Any], thread_id: str
    ) -> tuple[Row | None, DictRow | None]:
        """``begin_resume``, and the saver's read of the thread's latest checkpoint sent with it
        (one round trip for both): the resumed graph's first step loads that checkpoint, and
        ``PooledSaver.aget_tuple`` answers from this read, since under the thread's lock nothing
        else writes on the thread. The claim forgets it when it ends (``forget_known``)."""
        async with self._db.connection() as conn:
            read = conn.cursor(binary=True, row_factory=dict_row)
            # On a libpq without pipeline mode: one after the other.
            async with conn.pipeline() if psycopg.Pipeline.is_supported() else nullcontext():
                began = await conn.execute(sql("begin_resume"), params)
                await read.execute(LATEST_CHECKPOINT, (thread_id, ""), binary=True)
            return await began.fetchone(), await read.fetchone()

    def _waiting_on(self, latest: DictRow | None, request_id: str) -> str | None:
        """The id of the interrupt of the latest checkpoint whose payload names ``request_id``.
        Only the checkpoint's interrupt writes are decoded (not the conversation), in the order
        of their task and index; each write is (task, channel, type, blob, path, index)."""
        interrupts = sorted(
            (bytes(task), int(bytes(idx)), bytes(type_).decode(), bytes(blob))
            for task, channel, type_, blob, _path, idx in (latest or {}).get("pending_writes") or []
            if bytes(channel) == b"__interrupt__"
        )
        for _task, _idx, type_, blob in interrupts:
            value: Any = self._serde.loads_typed((type_, blob))
            for intr in value if isinstance(value, list | tuple) else [value]:
                payload = getattr(intr, "value", None)
                if isinstance(payload, dict) and payload.get("request_id") == request_id:
                    return str(intr.id)
        return None


def _decided(row: Row) -> tuple[PendingCall, DecisionRecord] | None:
    """The job's request and its decision, when the request is decided."""
    if row["id"] is None or row["status"] not in DECIDED_STATUSES:
        return None
    decision = joined_decision(row)
    return (PendingCall.from_row(row), decision) if decision is not None else None
