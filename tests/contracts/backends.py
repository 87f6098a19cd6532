"""The two backends of every port: the PostgreSQL adapters on one database, and the in-memory
adapter on one store, each with the probes the contract tests need for what the ports do not
read back."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from approvals.memory import (
    MemoryAccounts,
    MemoryApprovalRequests,
    MemoryDecisions,
    MemoryExpiry,
    MemoryResumeChecks,
    MemoryResumeQueue,
    MemoryRuns,
    MemoryStore,
    MemoryToolLedger,
)
from approvals.ports import (
    Accounts,
    ApprovalRequests,
    Decisions,
    Expiry,
    ResumeChecks,
    ResumeQueue,
    Runs,
    ToolLedger,
)
from storage.accounts import PgAccounts
from storage.checkpoints import PgResumeChecks
from storage.db import Database, open_pool
from storage.expiry import PgExpiry
from storage.queue import PgResumeQueue
from storage.requests import PgApprovalRequests, PgDecisions
from storage.runs import PgRuns, PgToolLedger


@dataclass(frozen=True, kw_only=True)
class Adapters:
    """One backend's adapter of every port, all on one database (or one store)."""

    backend: str
    requests: ApprovalRequests
    decisions: Decisions
    expiry: Expiry
    ledger: ToolLedger
    runs: Runs
    queue: ResumeQueue
    checks: ResumeChecks
    accounts: Accounts
    #: Who approved a request that waits for more approvers, in order (not a port method).
    votes: Callable[[str], Awaitable[list[str]]]
    #: Disable a local account (not a port method).
    disable_user: Callable[[str], Awaitable[bool]]
    #: How many times a request was recorded as tampered with.
    tampered: Callable[[str], Awaitable[int]]
    #: A second queue on the same database: another worker.
    other_queue: Callable[[], ResumeQueue]
    #: How many steps or claims wait for a thread's lock now (not a port method; PostgreSQL:
    #: the advisory locks not granted in the database, whichever thread's).
    thread_waiters: Callable[[str], Awaitable[int]]


@asynccontextmanager
async def postgres_adapters(database_url: str) -> AsyncIterator[Adapters]:
    pool = open_pool(database_url)
    await pool.open(wait=True)
    db = Database(pool)
    requests = PgApprovalRequests(db)
    accounts = PgAccounts(db)
    queues: list[PgResumeQueue] = []

    def queue() -> PgResumeQueue:
        queues.append(PgResumeQueue(db, database_url))
        return queues[-1]

    async def tampered(request_id: str) -> int:
        async with pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT count(*) AS n FROM audit_events"
                " WHERE request_id = %s AND kind = 'request.tampered'",
                (request_id,),
            )
            row = await cursor.fetchone()
        assert row is not None
        return int(row["n"])

    async def disable_user(name: str) -> bool:
        return await accounts.disable_user(name)

    async def thread_waiters(thread_id: str) -> int:
        async with pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
            row = await cursor.fetchone()
        assert row is not None
        return int(row["n"])

    try:
        yield Adapters(
            backend="postgres",
            requests=requests,
            decisions=PgDecisions(db),
            expiry=PgExpiry(db),
            ledger=PgToolLedger(db),
            runs=PgRuns(db),
            queue=queue(),
            checks=PgResumeChecks(db, JsonPlusSerializer()),
            accounts=accounts,
            votes=requests.votes,
            disable_user=disable_user,
            tampered=tampered,
            other_queue=queue,
            thread_waiters=thread_waiters,
        )
    finally:
        for q in queues:
            await q.close()
        await pool.close()


def memory_adapters() -> Adapters:
    store = MemoryStore()
    requests = MemoryApprovalRequests(store)
    accounts = MemoryAccounts(store)

    async def tampered(request_id: str) -> int:
        return 1 if request_id in store.tampered else 0

    async def thread_waiters(thread_id: str) -> int:
        # asyncio.Lock's own queue of waiters (a private field: the one place that says who
        # waits).
        return len(store.thread_lock(thread_id)._waiters or ())

    return Adapters(
        backend="memory",
        requests=requests,
        decisions=MemoryDecisions(store),
        expiry=MemoryExpiry(store),
        ledger=MemoryToolLedger(store),
        runs=MemoryRuns(store),
        queue=MemoryResumeQueue(store),
        checks=MemoryResumeChecks(store),
        accounts=accounts,
        votes=requests.votes,
        disable_user=accounts.disable_user,
        tampered=tampered,
        other_queue=lambda: MemoryResumeQueue(store),
        thread_waiters=thread_waiters,
    )
