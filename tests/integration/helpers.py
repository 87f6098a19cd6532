"""Small helpers the integration tests share: reading what really happened from the database."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx

from approvals.model import JobStatus
from storage.queue import PgClaimedJob
from tests.waiting import eventually, ready_tasks_ran
from web.engine import Engine
from web.serving import bind, serving, url_of
from web.settings import Settings


async def side_effects(engine: Engine, run_id: str, call_id: str) -> list[dict[str, Any]]:
    return await engine.effects.for_call(run_id, call_id)


async def thread_values(engine: Engine, graph: str, thread_id: str) -> dict[str, Any]:
    """The state a registered graph's thread holds now."""
    snapshot = await engine.registry.get(graph).aget_state(
        {"configurable": {"thread_id": thread_id}}
    )
    return dict(snapshot.values)


async def scalar(engine: Engine, query: str, *params: Any) -> Any:
    async with engine.connection() as conn:
        row = await (await conn.execute(query, params)).fetchone()
    assert row is not None
    return next(iter(row.values()))


async def start_refund(
    engine: Engine, message: str = "refund 1001", principal: str = "alice"
) -> Any:
    outcome = await engine.runner.start("refund", {"message": message}, principal=principal)
    assert outcome.status == "waiting", outcome
    return outcome


@asynccontextmanager
async def thread_lock(engine: Engine, thread_id: str) -> AsyncIterator[None]:
    """Hold a thread's lock the way a running step does (same key as the engine's queries),
    to stand between a worker and the thread."""
    async with engine.connection() as conn:
        await conn.execute(
            "select pg_advisory_lock(approvals_thread_lock_key_v1(%s))", (thread_id,)
        )
        try:
            yield
        finally:
            await conn.execute(
                "select pg_advisory_unlock(approvals_thread_lock_key_v1(%s))", (thread_id,)
            )


async def person_token(engine: Engine, name: str, *groups: str) -> str:
    """The secret of an API token named ``name`` that belongs to a local account of the same
    name in ``groups``: a person's token, which may decide (a service token never does)."""
    await engine.accounts.add_user(name, "correct horse battery staple", list(groups))
    return await engine.accounts.create_token(name, list(groups), created_by="test", owner=name)


async def run_status(engine: Engine, run_id: str) -> str:
    return str(await scalar(engine, "SELECT status FROM runs WHERE id = %s", run_id))


async def completed(engine: Engine, run_id: str, seconds: float = 30) -> None:
    """Until the run has completed (a worker, of this process or another, resumed it)."""

    async def done() -> bool:
        run = await engine.runs.get(run_id)
        return run is not None and run.status == "completed"

    await eventually(done, timeout=seconds, what=f"run {run_id} to complete")


async def until(engine: Engine, query: str, seconds: float = 30) -> None:
    """Wait until ``query`` (one boolean) is true: what a worker of another thread does."""
    await eventually(lambda: scalar(engine, query), timeout=seconds, what=query)


#: Whether a backend of this database waits for a lock (a row's, an advisory lock): the
#: statement a test set up to block on another transaction has reached that point.
WAITS_FOR_A_LOCK = (
    "select count(*) > 0 from pg_stat_activity"
    " where datname = current_database() and wait_event_type = 'Lock'"
)


#: Whether a backend of this database LISTENs for queued resumes: a worker's queue that waits
#: for a notification (its last statement, done: a listening connection sends nothing more
#: until it is woken). A resume queued from then on wakes it.
LISTENS_FOR_RESUMES = (
    "select count(*) > 0 from pg_stat_activity where datname = current_database()"
    " and query = 'LISTEN approvals_resume' and state = 'idle'"
)


@contextmanager
def counted_waits(queue: Any) -> Iterator[Callable[[], int]]:
    """For the block, count the waits for a notification that ``queue`` (a resume queue) has
    begun: yields the count so far. A worker's idle wait is one."""
    original = queue.wait
    begun = 0

    async def wait(seconds: float) -> bool:
        nonlocal begun
        begun += 1
        return bool(await original(seconds))

    queue.wait = wait
    try:
        yield lambda: begun
    finally:
        queue.wait = original


async def idle(engine: Engine, waits: Callable[[], int], count: int = 1) -> None:
    """Until a worker on ``engine``'s database is in its ``count``-th wait for a notification
    (``counted_waits``): begun, its queue listening, and every task that was ready has run (so
    the wait is under way: from a listening connection, it needs no I/O to get there)."""
    await eventually(lambda: waits() >= count, what=f"wait number {count} of the worker")
    await until(engine, LISTENS_FOR_RESUMES)
    await ready_tasks_ran()


@contextmanager
def poisoned(engine: Engine, run_id: str) -> Iterator[None]:
    """Resumes of ``run_id`` by ``engine``'s worker raise what the engine does not know of (a
    graph's own bug): their jobs end failed."""
    runner = engine.runner
    original = runner.resume

    async def resume(claimed: Any) -> Any:
        if claimed.job.run_id == run_id:
            raise KeyError("a graph's own bug")
        return await original(claimed)

    runner.resume = resume  # type: ignore[method-assign]
    try:
        yield
    finally:
        runner.resume = original  # type: ignore[method-assign]


@contextmanager
def closing_fails_once() -> Iterator[list[JobStatus]]:
    """The first job closed as done raises instead, after its step ran (its tool included), as
    a crash there would: the job ends failed. Yields the statuses it refused (one, or none)."""
    original = PgClaimedJob.complete
    raised: list[JobStatus] = []

    async def complete(self: PgClaimedJob, status: JobStatus, *args: Any, **kw: Any) -> None:
        if status is JobStatus.DONE and not raised:
            raised.append(status)
            raise KeyError("lost while closing the job")
        await original(self, status, *args, **kw)

    PgClaimedJob.complete = complete  # type: ignore[method-assign]
    try:
        yield raised
    finally:
        PgClaimedJob.complete = original  # type: ignore[method-assign]


async def drain_failing_after_the_step(engine: Engine) -> None:
    """Drain ``engine``'s worker, one job, whose closing fails once (``closing_fails_once``)."""
    with closing_fails_once() as raised:
        assert await engine.worker.drain() == 1
    assert raised, "the job was not closed as done"


async def events_of(engine: Engine, run_id: str, kind: str) -> list[dict[str, Any]]:
    """The run's audit events of one kind, oldest first."""
    return [e for e in await engine.audit.for_run(run_id) if e["kind"] == kind]


async def verified(engine: Engine) -> None:
    """The decision log's chain verifies."""
    result = await engine.audit.verify()
    assert result.ok, result


@asynccontextmanager
async def served_api(
    engine: Engine, settings: Settings, token: str
) -> AsyncIterator[httpx.AsyncClient]:
    """The app served over TCP on ``engine`` (without a worker of its own: the test drives the
    engine's), and an API client that sends ``token``."""
    sock = bind("127.0.0.1", 0)
    url = url_of(sock)
    try:
        async with (
            serving(settings.model_copy(update={"public_url": url}), sock, engine=engine),
            httpx.AsyncClient(
                base_url=url, headers={"authorization": f"Bearer {token}"}, timeout=60
            ) as api,
        ):
            yield api
    finally:
        sock.close()
