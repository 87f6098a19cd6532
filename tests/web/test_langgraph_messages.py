"""``stream_mode="messages-tuple"`` through the LangGraph face, with the real ``langgraph_sdk``
client: whoever may read the run is sent each AI message its recorded node updates carry, as
``messages`` events (``[message, metadata]``); an approver, who never sees the conversation's
text, is sent none."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.schema import Command, StreamPart

from tests.integration.helpers import person_token
from tests.web.conftest import Server
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")

REFUND: dict[str, Any] = {"messages": [{"role": "user", "content": "refund 1001"}]}
APPROVE: Command = {"resume": {"decisions": [{"type": "approve"}]}}


async def streamed(
    server: Server, token: str, thread_id: str | None, **run: Any
) -> tuple[str, list[StreamPart]]:
    """A run streamed with ``messages-tuple`` (on a new thread when ``thread_id`` is
    ``None``): the thread id and the stream's parts."""
    client = get_client(url=f"{server.url}/langgraph", api_key=token, timeout=120)
    try:
        if thread_id is None:
            thread_id = (await client.threads.create())["thread_id"]
        parts = [
            part
            async for part in client.runs.stream(
                thread_id, "refund", stream_mode=["messages-tuple", "updates"], **run
            )
        ]
    finally:
        await client.aclose()
    return thread_id, parts


async def test_the_starter_is_sent_the_ai_messages_and_an_approver_none(
    server: Server, engine: Engine
) -> None:
    shop = await person_token(engine, "shop", "agents")
    support = await person_token(engine, "lead", "support")
    thread_id, started = await streamed(server, shop, None, input=REFUND)
    assert started[0].event == "metadata"
    messages = [p.data for p in started if p.event == "messages"]
    # The model's two steps: it looks the order up, then asks to refund it.
    assert [m["type"] for m, _ in messages] == ["ai", "ai"]
    calls = [[c["name"] for c in m["tool_calls"]] for m, _ in messages]
    assert calls == [["lookup_order"], ["issue_refund"]]
    assert {(meta["langgraph_node"], meta["thread_id"]) for _, meta in messages} == {
        ("model", thread_id)
    }
    _, resumed = await streamed(server, support, thread_id, command=APPROVE)
    assert [p.event for p in resumed if p.event == "updates"], resumed
    assert [p for p in resumed if p.event == "messages"] == []
    assert "Refunded" not in str([p.data for p in resumed])
