"""``POST /langgraph/threads`` with a thread id already in use, asked by callers who may and
may not see the thread: the answer is the one a taken id gets, the same whoever asks, and it
tells nothing of the thread (its owner, its state, whether the caller could see it). Thread ids
are one namespace (a run on a taken id is refused anyway); what is hidden is a thread's
contents, as ``GET /threads/{id}`` answers 404 for a thread one may not see."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import ConflictError

from tests.integration.helpers import person_token, scalar
from tests.web.conftest import Server
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")

REFUND: dict[str, Any] = {"messages": [{"role": "user", "content": "refund 1001"}]}


async def test_a_taken_thread_id_is_one_conflict_whoever_asks_and_says_nothing_of_it(
    server: Server, engine: Engine
) -> None:
    shop = await person_token(engine, "shop", "agents")
    finance = await person_token(engine, "fin", "finance")
    taken = f"ticket-{uuid.uuid4()}"
    client = get_client(url=f"{server.url}/langgraph", api_key=shop, timeout=120)
    try:
        await client.threads.create(thread_id=taken)
        await client.runs.wait(taken, "refund", input=REFUND)
    finally:
        await client.aclose()

    async with httpx.AsyncClient(base_url=f"{server.url}/langgraph", timeout=60) as http:

        async def create(token: str, **body: str) -> httpx.Response:
            return await http.post(
                "/threads", json={"thread_id": taken, **body}, headers={"x-api-key": token}
            )

        own = await create(shop)
        foreign = await create(finance)
        foreign_do_nothing = await create(finance, if_exists="do_nothing")
        # The starter, who may see it, is given its thread.
        mine = await create(shop, if_exists="do_nothing")
        free = await http.post(
            "/threads", json={"thread_id": f"ticket-{uuid.uuid4()}"}, headers={"x-api-key": finance}
        )

    def answer(response: httpx.Response) -> tuple[int, str, bytes]:
        return response.status_code, response.headers["content-type"], response.content

    assert answer(foreign) == answer(own) == answer(foreign_do_nothing)
    assert own.status_code == 409
    assert own.json() == {"detail": "a thread with this id exists", "code": "conflict"}
    assert mine.status_code == 200
    assert (mine.json()["thread_id"], mine.json()["status"]) == (taken, "interrupted")
    assert free.status_code == 200
    # The SDK raises its own exception for it; asking made nothing.
    client = get_client(url=f"{server.url}/langgraph", api_key=finance, timeout=120)
    try:
        with pytest.raises(ConflictError):
            await client.threads.create(thread_id=taken, if_exists="do_nothing")
    finally:
        await client.aclose()
    assert await scalar(engine, "select count(*) from runs") == 1
