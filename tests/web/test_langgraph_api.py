"""The LangGraph Server face (``/langgraph``) driven by the real ``langgraph_sdk`` client over
HTTP, against the served app and its worker on PostgreSQL: a refund agent's run pauses with
HumanInTheLoopMiddleware's payload, the approver finds it and resumes it with HITL's
``Command(resume=...)``, which is a decision with every approver rule, consumed once."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import AuthenticationError, NotFoundError, PermissionDeniedError
from langgraph_sdk.schema import Command

from tests.integration.helpers import person_token, scalar
from tests.integration.redaction_graphs import CARD, CVV
from tests.web.conftest import Server
from web.engine import Engine
from web.settings import Settings

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture
def web_settings(web_settings: Settings) -> Settings:
    # A graph whose policy redacts a card number and its code from approvers.
    cards = {"cards": "tests.integration.redaction_graphs:build"}
    return web_settings.model_copy(update={"graphs": cards})


REFUND: dict[str, Any] = {"messages": [{"role": "user", "content": "refund 1001"}]}
APPROVE: Command = {"resume": {"decisions": [{"type": "approve"}]}}


@asynccontextmanager
async def langgraph(server: Server, token: str | None) -> AsyncIterator[LangGraphClient]:
    """The SDK's client, pointed at the served face as its users point it."""
    client = get_client(url=f"{server.url}/langgraph", api_key=token, timeout=120)
    try:
        yield client
    finally:
        await client.aclose()


async def waited(
    client: LangGraphClient,
    thread_id: str,
    *,
    input: dict[str, Any] | None = None,
    command: Command | None = None,
) -> dict[str, Any]:
    """``runs.wait`` of the refund agent on ``thread_id``: the thread's values (a dict)."""
    result = await client.runs.wait(thread_id, "refund", input=input, command=command)
    assert isinstance(result, dict), result
    return result


def messages_of(state: Any) -> list[dict[str, Any]]:
    """The conversation in a thread state's values."""
    values = state["values"]
    assert isinstance(values, dict), values
    messages: list[dict[str, Any]] = values["messages"]
    return messages


async def refunds(engine: Engine) -> int:
    return int(await scalar(engine, "select count(*) from demo_side_effects"))


async def interrupted_refund(
    server: Server, engine: Engine, shop: str | None = None
) -> tuple[str, dict[str, Any], str]:
    """A refund started by ``shop`` (made here when not given) through the SDK on a thread it
    created: the thread id, what ``runs.wait`` answered and shop's token."""
    shop = shop or await person_token(engine, "shop", "agents")
    async with langgraph(server, shop) as client:
        created = await client.threads.create()
        thread_id = created["thread_id"]
        result = await waited(client, thread_id, input=REFUND)
    return thread_id, result, shop


async def test_assistants_are_the_registered_graphs(server: Server, engine: Engine) -> None:
    shop = await person_token(engine, "shop", "agents")
    async with langgraph(server, shop) as client:
        found = await client.assistants.search()
        names = {a["assistant_id"] for a in found}
        assert {"refund", "email"} <= names
        assert all(a["graph_id"] == a["assistant_id"] for a in found)
        one = await client.assistants.get("refund")
        assert one["graph_id"] == "refund"
        only = await client.assistants.search(graph_id="email")
        assert [a["assistant_id"] for a in only] == ["email"]
        with pytest.raises(NotFoundError):
            await client.assistants.get("no-such-graph")


async def test_a_run_pauses_with_hitls_payload_in_the_thread_state(
    server: Server, engine: Engine
) -> None:
    thread_id, result, shop = await interrupted_refund(server, engine)
    [interrupt] = result["__interrupt__"]
    assert interrupt["value"]["action_requests"] == [
        {
            "name": "issue_refund",
            "args": {"order_id": "1001", "amount": 25.0, "reason": "customer request"},
            "description": interrupt["value"]["action_requests"][0]["description"],
        }
    ]
    assert interrupt["value"]["review_configs"][0]["action_name"] == "issue_refund"
    assert "approve" in interrupt["value"]["review_configs"][0]["allowed_decisions"]
    async with langgraph(server, shop) as client:
        state = await client.threads.get_state(thread_id)
        assert state["interrupts"] == [interrupt]
        assert [t["interrupts"] for t in state["tasks"]] == [[interrupt]]
        assert state["next"]
        # The starter reads its own conversation.
        assert messages_of(state)[0]["content"] == "refund 1001"
        got = await client.threads.get(thread_id)
        assert got["status"] == "interrupted"
    assert await refunds(engine) == 0


async def test_the_approver_finds_the_thread_and_another_groups_approver_does_not(
    server: Server, engine: Engine
) -> None:
    thread_id, _, _ = await interrupted_refund(server, engine)
    support = await person_token(engine, "lead", "support")
    finance = await person_token(engine, "fin", "finance")
    async with langgraph(server, support) as client:
        found = await client.threads.search(status="interrupted")
        assert [t["thread_id"] for t in found] == [thread_id]
        assert [t["thread_id"] for t in await client.threads.search(ids=[thread_id])] == [thread_id]
        [interrupts] = found[0]["interrupts"].values()
        assert interrupts[0]["value"]["action_requests"][0]["name"] == "issue_refund"
        state = await client.threads.get_state(thread_id)
        assert len(state["interrupts"]) == 1
        # An approver sees the call, never the run's conversation.
        assert state["values"] == {}
    async with langgraph(server, finance) as client:
        assert await client.threads.search(status="interrupted") == []
        assert await client.threads.search(ids=[thread_id]) == []
        with pytest.raises(NotFoundError):
            await client.threads.get(thread_id)
        with pytest.raises(NotFoundError):
            await client.threads.get_state(thread_id)


async def test_the_approver_resumes_with_hitls_command_and_the_refund_runs_once(
    server: Server, engine: Engine
) -> None:
    thread_id, _, shop = await interrupted_refund(server, engine)
    support = await person_token(engine, "lead", "support")
    async with langgraph(server, support) as client:
        result = await waited(client, thread_id, command=APPROVE)
        assert "__interrupt__" not in result
        with pytest.raises(httpx.HTTPStatusError) as again:
            await waited(client, thread_id, command=APPROVE)
        assert again.value.response.status_code == 409
    assert await refunds(engine) == 1
    async with langgraph(server, shop) as client:
        state = await client.threads.get_state(thread_id)
        assert state["interrupts"] == []
        assert "Refunded 25.00" in messages_of(state)[-1]["content"]
        assert (await client.threads.get(thread_id))["status"] == "idle"


async def test_a_rejection_by_interrupt_id_runs_nothing(server: Server, engine: Engine) -> None:
    thread_id, result, shop = await interrupted_refund(server, engine)
    interrupt_id = result["__interrupt__"][0]["id"]
    support = await person_token(engine, "lead", "support")
    rejected = {"decisions": [{"type": "reject", "message": "not this one"}]}
    async with langgraph(server, support) as client:
        await waited(client, thread_id, command={"resume": {interrupt_id: rejected}})
    # The worker resumed the run before the approver was answered: the model heard why.
    async with langgraph(server, shop) as client:
        assert (await client.threads.get(thread_id))["status"] == "idle"
        state = await client.threads.get_state(thread_id)
        assert state["interrupts"] == []
        assert any("not this one" in str(m["content"]) for m in messages_of(state))
    assert await refunds(engine) == 0
    decision = await scalar(engine, "select kind || ':' || reason from decisions")
    assert decision == "reject:not this one"


async def test_an_edit_runs_the_edited_arguments_and_a_kind_not_offered_is_refused(
    server: Server, engine: Engine
) -> None:
    thread_id, _, _ = await interrupted_refund(server, engine)
    support = await person_token(engine, "lead", "support")
    args = {"order_id": "1001", "amount": 10.0, "reason": "customer request"}
    edit: Command = {
        "resume": {
            "decisions": [{"type": "edit", "edited_action": {"name": "issue_refund", "args": args}}]
        }
    }
    # The refund policy offers approve, edit and reject: no answer in the tool's place.
    respond: Command = {
        "resume": {"decisions": [{"type": "respond", "message": "refunded by hand"}]}
    }
    async with langgraph(server, support) as client:
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await waited(client, thread_id, command=respond)
        assert refused.value.response.status_code == 422
        # An edit goes through the policy again: above 1000.00 it denies.
        huge: Command = {
            "resume": {
                "decisions": [
                    {
                        "type": "edit",
                        "edited_action": {"name": "issue_refund", "args": {**args, "amount": 5e3}},
                    }
                ]
            }
        }
        with pytest.raises(httpx.HTTPStatusError) as denied:
            await waited(client, thread_id, command=huge)
        assert denied.value.response.status_code == 422, denied.value.response.text
        assert denied.value.response.json()["code"] == "edit_refused"
        await waited(client, thread_id, command=edit)
    assert await scalar(engine, "select args from demo_side_effects") == args
    assert await scalar(engine, "select string_agg(kind, ',') from decisions") == "edit"


async def test_racing_resumes_decide_once_and_refund_once(server: Server, engine: Engine) -> None:
    thread_id, _, _ = await interrupted_refund(server, engine)
    support = await person_token(engine, "lead", "support")
    async with langgraph(server, support) as client:
        answers = await asyncio.gather(
            *(waited(client, thread_id, command=APPROVE) for _ in range(8)),
            return_exceptions=True,
        )
    won = [a for a in answers if isinstance(a, dict)]
    lost = [a for a in answers if isinstance(a, httpx.HTTPStatusError)]
    assert len(won) == 1, answers
    assert [e.response.status_code for e in lost] == [409] * 7, answers
    assert await scalar(engine, "select count(*) from decisions") == 1
    assert await refunds(engine) == 1


async def test_an_outsider_and_a_service_token_may_not_resume(
    server: Server, engine: Engine
) -> None:
    thread_id, _, _ = await interrupted_refund(server, engine)
    finance = await person_token(engine, "fin", "finance")
    service = await engine.accounts.create_token("bot", ["support"], created_by="test", owner=None)
    async with langgraph(server, finance) as client:
        with pytest.raises(httpx.HTTPStatusError) as outsider:
            await waited(client, thread_id, command=APPROVE)
    assert outsider.value.response.status_code == 404
    async with langgraph(server, service) as client:
        with pytest.raises(httpx.HTTPStatusError) as bot:
            await waited(client, thread_id, command=APPROVE)
        assert bot.value.response.status_code == 403
        # A service token starts runs of its own.
        own = await client.threads.create()
        started = await waited(client, own["thread_id"], input=REFUND)
        assert started["__interrupt__"]
    assert await scalar(engine, "select count(*) from decisions") == 0
    assert await refunds(engine) == 0


async def test_no_token_or_a_wrong_one_is_refused_in_the_sdks_own_error(
    server: Server, engine: Engine
) -> None:
    async with langgraph(server, None) as client:
        with pytest.raises(AuthenticationError):
            await client.assistants.search()
    async with langgraph(server, "not-a-token") as client:
        with pytest.raises(AuthenticationError) as refused:
            await client.threads.search()
        assert refused.value.response.json()["code"] == "unauthenticated"
    # A bearer token works as well as x-api-key; a body that is not JSON is 422 in LangGraph's
    # shape.
    shop = await person_token(engine, "shop", "agents")
    async with httpx.AsyncClient(base_url=f"{server.url}/langgraph", timeout=60) as http:
        bearer = {"authorization": f"Bearer {shop}"}
        listed = await http.post("/assistants/search", json={}, headers=bearer)
        assert listed.status_code == 200, listed.text
        garbled = await http.post(
            "/threads", content=b"\xff", headers={**bearer, "content-type": "application/json"}
        )
        assert garbled.status_code == 422, garbled.text
        assert "detail" in garbled.json()


async def test_a_busy_thread_refuses_a_second_run_and_goto_is_refused(
    server: Server, engine: Engine
) -> None:
    thread_id, _, shop = await interrupted_refund(server, engine)
    support = await person_token(engine, "lead", "support")
    async with langgraph(server, shop) as client:
        with pytest.raises(httpx.HTTPStatusError) as busy:
            await waited(client, thread_id, input=REFUND)
        assert busy.value.response.status_code == 409
    async with langgraph(server, support) as client:
        with pytest.raises(httpx.HTTPStatusError) as goto:
            await waited(client, thread_id, command={**APPROVE, "goto": "tools"})
        assert goto.value.response.status_code == 422
        wrongs: list[dict[str, Any]] = [
            {"decisions": []},
            {"no-such-interrupt": {"type": "approve"}},
        ]
        for wrong in wrongs:
            with pytest.raises(httpx.HTTPStatusError) as refused:
                await waited(client, thread_id, command={"resume": wrong})
            assert refused.value.response.status_code == 422
    assert await scalar(engine, "select count(*) from decisions") == 0


async def test_a_background_run_is_joined_and_read(server: Server, engine: Engine) -> None:
    shop = await person_token(engine, "shop", "agents")
    async with langgraph(server, shop) as client:
        thread_id = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread_id, "refund", input=REFUND)
        assert run["thread_id"] == thread_id
        joined = await client.runs.join(thread_id, run["run_id"])
        assert isinstance(joined, dict)
        assert joined["__interrupt__"]
        read = await client.runs.get(thread_id, run["run_id"])
        assert read["status"] == "interrupted"
        with pytest.raises(NotFoundError):
            await client.runs.get(str(uuid.uuid4()), run["run_id"])


async def test_runs_stream_yields_the_sdks_events_to_the_interrupt_and_after_the_resume(
    server: Server, engine: Engine
) -> None:
    shop = await person_token(engine, "shop", "agents")
    support = await person_token(engine, "lead", "support")
    async with langgraph(server, shop) as client:
        thread_id = (await client.threads.create())["thread_id"]
        started = [
            part
            async for part in client.runs.stream(
                thread_id, "refund", input=REFUND, stream_mode=["values", "updates"]
            )
        ]
    assert started[0].event == "metadata"
    updates = [p.data for p in started if p.event == "updates"]
    assert updates, started
    assert started[-1].event == "values"
    [interrupt] = started[-1].data["__interrupt__"]
    assert interrupt["value"]["action_requests"][0]["name"] == "issue_refund"
    async with langgraph(server, support) as client:
        resumed = [
            part
            async for part in client.runs.stream(
                thread_id, "refund", command=APPROVE, stream_mode="updates"
            )
        ]
    assert resumed[0].event == "metadata"
    assert [p.event for p in resumed[1:]] == ["updates"] * (len(resumed) - 1)
    assert len(resumed) > 1
    # The approver follows the step, never the conversation's text.
    assert "Refunded" not in str([p.data for p in resumed])
    assert await refunds(engine) == 1


async def test_only_the_starter_cancels_and_a_cancelled_run_leaves_nothing_to_decide(
    server: Server, engine: Engine
) -> None:
    shop = await person_token(engine, "shop", "agents")
    support = await person_token(engine, "lead", "support")
    async with langgraph(server, shop) as client:
        thread_id = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread_id, "refund", input=REFUND)
        await client.runs.join(thread_id, run["run_id"])
    async with langgraph(server, support) as client:
        with pytest.raises(PermissionDeniedError):
            await client.runs.cancel(thread_id, run["run_id"])
    async with langgraph(server, shop) as client:
        await client.runs.cancel(thread_id, run["run_id"])
        assert (await client.runs.get(thread_id, run["run_id"]))["status"] == "interrupted"
        [state] = await client.threads.get_history(thread_id)
        assert state["interrupts"] == []
        # A stateless run gets a thread of its own.
        alone = await client.runs.wait(None, "refund", input=REFUND)
        assert isinstance(alone, dict)
        assert alone["__interrupt__"]
    async with langgraph(server, support) as client:
        waiting = await client.threads.search(status="interrupted")
        assert thread_id not in [t["thread_id"] for t in waiting]
        assert len(waiting) == 1  # the stateless run's
        with pytest.raises(httpx.HTTPStatusError) as nothing:
            await waited(client, thread_id, command=APPROVE)
        assert nothing.value.response.status_code == 409
    assert await refunds(engine) == 0


async def test_an_approver_is_shown_the_redacted_call_and_never_the_conversation(
    server: Server, engine: Engine
) -> None:
    shop = await person_token(engine, "shop", "agents")
    finance = await person_token(engine, "fin", "finance")
    async with langgraph(server, shop) as client:
        thread_id = (await client.threads.create())["thread_id"]
        started = await waited_on(client, thread_id, "cards", {"message": "charge it"})
        # The starter's own conversation holds what its model proposed.
        assert CARD in str(started)
    async with langgraph(server, finance) as client:
        found = await client.threads.search(status="interrupted")
        state = await client.threads.get_state(thread_id)
        [interrupt] = state["interrupts"]
        assert interrupt["value"]["action_requests"][0]["args"]["amount"] == 42.0
        resumed = [
            part
            async for part in client.runs.stream(
                thread_id, "cards", command=APPROVE, stream_mode=["values", "updates"]
            )
        ]
    assert [t["thread_id"] for t in found] == [thread_id]
    shown = str([found, state, [p.data for p in resumed]])
    assert CARD not in shown
    # The code standing alone ("737" also turns up inside ids and hashes).
    assert re.search(rf"(?<![0-9A-Za-z]){CVV}(?![0-9A-Za-z])", shown) is None
    assert await refunds(engine) == 1  # the charge, with the full arguments
    assert await scalar(engine, "select args->>'card_number' from demo_side_effects") == CARD


async def waited_on(
    client: LangGraphClient, thread_id: str, graph: str, input: dict[str, Any]
) -> dict[str, Any]:
    result = await client.runs.wait(thread_id, graph, input=input)
    assert isinstance(result, dict), result
    return result
