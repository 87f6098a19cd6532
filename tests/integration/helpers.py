"""Small helpers the integration tests share: reading what really happened from the database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from web.engine import Engine


async def side_effects(engine: Engine, run_id: str, call_id: str) -> list[dict[str, Any]]:
    return await engine.effects.for_call(run_id, call_id)


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
