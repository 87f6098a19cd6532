"""Background starts through the LangGraph face (``runs.create``): the answer is the new run's
row, found when its insert's event arrives, or the start's own refusal when the start ends
before any row is written; either way one run per thread step."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import ConflictError, NotFoundError

from tests.integration.helpers import person_token, scalar
from tests.web.conftest import Server
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")

REFUND: dict[str, Any] = {"messages": [{"role": "user", "content": "refund 1001"}]}


async def test_racing_background_starts_on_a_new_thread_start_one_run_and_refuse_the_rest(
    server: Server, engine: Engine
) -> None:
    shop = await person_token(engine, "shop", "agents")
    client = get_client(url=f"{server.url}/langgraph", api_key=shop, timeout=120)
    try:
        thread_id = (await client.threads.create())["thread_id"]
        answers = await asyncio.gather(
            *(client.runs.create(thread_id, "refund", input=REFUND) for _ in range(4)),
            return_exceptions=True,
        )
        started = [a for a in answers if isinstance(a, dict)]
        refused = [a for a in answers if isinstance(a, ConflictError)]
        assert (len(started), len(refused)) == (1, 3), answers
        [run] = started
        assert run["thread_id"] == thread_id
        joined = await client.runs.join(thread_id, run["run_id"])
        assert isinstance(joined, dict)
        assert joined["__interrupt__"]
        # A start refused before its row (no such graph) is the start's own error.
        other = (await client.threads.create())["thread_id"]
        with pytest.raises(NotFoundError):
            await client.runs.create(other, "no-such-graph", input=REFUND)
    finally:
        await client.aclose()
    assert await scalar(engine, "select count(*) from runs") == 1
    assert await scalar(engine, "select count(*) from approval_requests") == 1
