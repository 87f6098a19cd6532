"""A HITL ``respond`` through the LangGraph face's ``command.resume``, with the real
``langgraph_sdk`` client: on a call whose request offers respond it is the engine's respond
decision (the tool never runs, the model gets the person's answer); on one that does not
offer it, a 422 that decides nothing."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.schema import Command

from tests.integration.helpers import person_token, scalar
from tests.web.conftest import Server
from web.engine import Engine
from web.settings import Settings

pytestmark = pytest.mark.asyncio(loop_scope="session")

ASK: dict[str, Any] = {"messages": [{"role": "user", "content": "ask may I refund 1001?"}]}
ANSWER: Command = {"resume": {"decisions": [{"type": "respond", "message": "yes, up to 50"}]}}


@pytest.fixture
def web_settings(web_settings: Settings) -> Settings:
    # An ask-a-human agent: its ask_manager call offers respond and reject.
    asks = {"lc_ask": "tests.integration.respond_graphs:build"}
    return web_settings.model_copy(update={"graphs": asks})


async def test_a_respond_answers_in_the_tools_place_and_the_tool_never_runs(
    server: Server, engine: Engine
) -> None:
    shop = await person_token(engine, "shop", "agents")
    approver = await person_token(engine, "bob", "approvers")
    client = get_client(url=f"{server.url}/langgraph", api_key=shop, timeout=120)
    try:
        thread_id = (await client.threads.create())["thread_id"]
        paused = await client.runs.wait(thread_id, "lc_ask", input=ASK)
        assert isinstance(paused, dict), paused
        [interrupt] = paused["__interrupt__"]
        [config] = interrupt["value"]["review_configs"]
        assert set(config["allowed_decisions"]) == {"respond", "reject"}
    finally:
        await client.aclose()
    client = get_client(url=f"{server.url}/langgraph", api_key=approver, timeout=120)
    try:
        await client.runs.wait(thread_id, "lc_ask", command=ANSWER)
    finally:
        await client.aclose()
    client = get_client(url=f"{server.url}/langgraph", api_key=shop, timeout=120)
    try:
        assert (await client.threads.get(thread_id))["status"] == "idle"
        state = await client.threads.get_state(thread_id)
    finally:
        await client.aclose()
    values = state["values"]
    assert isinstance(values, dict)
    # The model heard the person's answer as the tool's success.
    assert values["messages"][-1]["content"] == "success: yes, up to 50"
    assert await scalar(engine, "select kind || ':' || reason from decisions") == (
        "respond:yes, up to 50"
    )
    # The tool's stub records itself when it runs: it never did.
    assert await scalar(engine, "select count(*) from demo_side_effects") == 0
