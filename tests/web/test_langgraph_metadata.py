"""Thread metadata through the LangGraph face, with the real ``langgraph_sdk`` client: a thread
created with ``metadata`` keeps it, ``threads.get`` returns it, and ``threads.search`` filters
on it by containment, with ``status`` and only among the threads the caller may see. A thread
that holds no run yet is its creator's alone. Retention deletes it with its thread's runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError

from tests.integration.helpers import person_token, scalar
from tests.web.conftest import Server
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")

REFUND: dict[str, Any] = {"messages": [{"role": "user", "content": "refund 1001"}]}


@asynccontextmanager
async def langgraph(server: Server, token: str) -> AsyncIterator[LangGraphClient]:
    client = get_client(url=f"{server.url}/langgraph", api_key=token, timeout=120)
    try:
        yield client
    finally:
        await client.aclose()


async def found(client: LangGraphClient, **search: Any) -> set[str]:
    return {t["thread_id"] for t in await client.threads.search(limit=100, **search)}


async def test_metadata_is_kept_returned_and_searched_by_containment_where_one_may_see(
    server: Server, engine: Engine
) -> None:
    shop = await person_token(engine, "shop", "agents")
    lead = await person_token(engine, "lead", "support")
    finance = await person_token(engine, "fin", "finance")
    gold = {"team": "billing", "ticket": "T-1", "customer": {"id": 7, "tier": "gold"}}
    async with langgraph(server, shop) as client:
        ran = (await client.threads.create(metadata=gold))["thread_id"]
        idle = (await client.threads.create(metadata={"team": "billing", "ticket": "T-2"}))[
            "thread_id"
        ]
        assert (await client.threads.get(idle))["metadata"] == {"team": "billing", "ticket": "T-2"}
        await client.runs.wait(ran, "refund", input=REFUND)
        shown = await client.threads.get(ran)
        assert shown["status"] == "interrupted"
        assert shown["metadata"] == {**gold, "graph_id": "refund", "assistant_id": "refund"}
        assert await found(client, metadata={"team": "billing"}) == {ran, idle}
        assert await found(client, metadata={"customer": {"tier": "gold"}}) == {ran}
        assert await found(client, metadata={"ticket": "T-2"}) == {idle}
        assert await found(client, metadata={"team": "billing", "graph_id": "refund"}) == {ran}
        assert await found(client, metadata={"team": "billing"}, status="idle") == {idle}
        assert await found(client, metadata={"team": "sales"}) == set()
        # Taken ids stay taken, whatever if_exists says when the thread is another's.
        with pytest.raises(ConflictError):
            await client.threads.create(thread_id=idle)
        again = await client.threads.create(thread_id=idle, if_exists="do_nothing")
        assert again["metadata"] == {"team": "billing", "ticket": "T-2"}
    # The approver finds the thread waiting for it, by its metadata.
    async with langgraph(server, lead) as client:
        assert await found(client, metadata={"ticket": "T-1"}, status="interrupted") == {ran}
        assert await found(client, metadata={"ticket": "T-2"}, status="interrupted") == set()
        seen = (await client.threads.get(ran))["metadata"]
        assert seen is not None
        assert seen["ticket"] == "T-1"
    # Another group's approver sees neither thread, nor their metadata.
    async with langgraph(server, finance) as client:
        assert await found(client, metadata={"team": "billing"}) == set()
        with pytest.raises(NotFoundError):
            await client.threads.get(ran)
        assert (await client.threads.get(idle))["metadata"] == {}
        with pytest.raises(ConflictError):
            await client.threads.create(thread_id=idle, if_exists="do_nothing")
        # Nor may it start the first run of another's thread (it would read its metadata).
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await client.runs.wait(idle, "refund", input=REFUND)
        assert refused.value.response.status_code == 404
    assert await scalar(engine, "select count(*) from runs") == 1


async def test_retention_deletes_a_kept_thread_with_its_runs(
    server: Server, engine: Engine
) -> None:
    shop = await person_token(engine, "shop", "agents")
    async with langgraph(server, shop) as client:
        old = (await client.threads.create(metadata={"ticket": "old"}))["thread_id"]
        recent = (await client.threads.create(metadata={"ticket": "recent"}))["thread_id"]
        for thread_id in (old, recent):
            await client.runs.wait(thread_id, "refund", input=REFUND)
            run_id = await scalar(
                engine, "select id::text from runs where thread_id = %s", thread_id
            )
            await client.runs.cancel(thread_id, run_id, wait=True)
    async with engine.connection() as conn:
        await conn.execute(
            "UPDATE runs SET updated_at = now() - interval '40 days' WHERE thread_id = %s", (old,)
        )
    pruned = await engine.prune(timedelta(days=30), principal="local:ops")
    assert pruned.runs == 1
    left = await scalar(engine, "select string_agg(thread_id, ',') from langgraph_threads")
    assert left == recent


async def test_metadata_the_database_cannot_keep_or_too_large_is_refused(
    server: Server, engine: Engine
) -> None:
    shop = await person_token(engine, "shop", "agents")
    async with httpx.AsyncClient(
        base_url=f"{server.url}/langgraph", headers={"x-api-key": shop}, timeout=60
    ) as http:
        for body in ({"metadata": {"note": "a\u0000b"}}, {"metadata": {"note": "x" * 20_000}}):
            created = await http.post("/threads", json=body)
            assert created.status_code == 422, created.text
            assert created.json()["code"] == "invalid_input"
        searched = await http.post("/threads/search", json={"metadata": {"note": "a\u0000b"}})
        assert searched.status_code == 422, searched.text
    assert await scalar(engine, "select count(*) from langgraph_threads") == 0
