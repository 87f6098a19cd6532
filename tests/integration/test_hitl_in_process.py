"""An ``ApprovalMiddleware`` agent the application invokes itself, as HumanInTheLoopMiddleware's
users do: HITL's payloads, resume and messages, with the engine's guarantees (the decision
recorded once as the application's, the tool run at most once however many resumes race)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import psycopg
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from graphs.examples.scripted import ScriptedToolModel
from graphs.langchain import in_process
from graphs.langchain.middleware import (
    ApprovalMiddleware,
    DecisionsOnlyThroughEngine,
    LocalApprovals,
)
from web.local import local_approvals

RACERS = 8


async def scalar_at(url: str, query: str, *params: Any) -> Any:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        row = await (await conn.execute(query, params)).fetchone()
    return None if row is None else row[0]


def _refund_agent(middleware: Any, ran: list[dict[str, Any]]) -> Any:
    @tool
    def issue_refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        # Slow enough that racing resumes overlap while it runs (time is the point).
        time.sleep(0.05)
        ran.append({"order_id": order_id, "amount": amount})
        return f"refunded {amount} on {order_id}"

    def script(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(content=f"done: {messages[-1].content}")
        return AIMessage(
            content="",
            tool_calls=[
                {"name": "issue_refund", "args": {"order_id": "1001", "amount": 25.0}, "id": "r1"}
            ],
        )

    return create_agent(
        model=ScriptedToolModel(script=script),
        tools=[issue_refund],
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )


async def _race(agent: Any, config: dict[str, Any], resume: Any) -> list[Any]:
    return await asyncio.gather(
        *(agent.ainvoke(Command(resume=resume), config) for _ in range(RACERS)),
        return_exceptions=True,
    )


async def _paused(agent: Any) -> tuple[dict[str, Any], Any]:
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    out = await agent.ainvoke({"messages": [HumanMessage("refund 1001")]}, config)
    [intr] = out["__interrupt__"]
    return config, intr


async def test_hitl_itself_runs_an_approved_refund_once_per_racing_resume() -> None:
    """The baseline the engine improves on (and the reason this middleware exists)."""
    ran: list[dict[str, Any]] = []
    agent = _refund_agent(HumanInTheLoopMiddleware(interrupt_on={"issue_refund": True}), ran)
    config, _ = await _paused(agent)
    await _race(agent, config, {"decisions": [{"type": "approve"}]})
    assert len(ran) > 1


async def test_racing_in_process_resumes_run_the_refund_once_in_memory() -> None:
    ran: list[dict[str, Any]] = []
    agent = _refund_agent(ApprovalMiddleware(interrupt_on={"issue_refund": True}), ran)
    config, intr = await _paused(agent)
    # HITL's batched payload, with the engine's fields beside it.
    assert intr.value["action_requests"][0]["name"] == "issue_refund"
    assert intr.value["action_requests"][0]["args"] == {"order_id": "1001", "amount": 25.0}
    assert intr.value["review_configs"][0]["allowed_decisions"] == [
        "approve",
        "edit",
        "reject",
        "respond",
    ]
    outcomes = await _race(agent, config, {"decisions": [{"type": "approve"}]})
    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    assert ran == [{"order_id": "1001", "amount": 25.0}]


async def test_racing_resumes_with_conflicting_decisions_follow_the_first_recorded() -> None:
    ran: list[dict[str, Any]] = []
    middleware = ApprovalMiddleware(interrupt_on={"issue_refund": True}, interrupt_mode="per_call")
    agent = _refund_agent(middleware, ran)
    config, intr = await _paused(agent)
    assert intr.value["type"] == "tool_approval"
    assert intr.value["request_id"]
    edit = {
        "type": "edit",
        "edited_action": {"name": "issue_refund", "args": {"order_id": "1001", "amount": 5.0}},
    }
    answers = [edit, {"type": "approve"}] * (RACERS // 2)
    outcomes = await asyncio.gather(
        *(agent.ainvoke(Command(resume=a), config) for a in answers), return_exceptions=True
    )
    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    # The first recorded decision (the edit, started first) is what ran, once.
    assert len(ran) == 1
    [request] = await middleware.local.requests.for_run(
        (await middleware.local.requests.get(intr.value["request_id"])).run_id  # type: ignore[union-attr]
    )
    assert request.status.value in ("approved", "edited")
    assert ran[0]["amount"] in (5.0, 25.0)


async def test_racing_in_process_resumes_run_the_refund_once_on_postgres(
    database_url: str,
) -> None:
    ran: list[dict[str, Any]] = []
    async with local_approvals(database_url, principal="app:shop") as local:
        agent = _refund_agent(
            ApprovalMiddleware(interrupt_on={"issue_refund": True}, local=local), ran
        )
        config, intr = await _paused(agent)
        # Batched: HITL's after_model asks; the request is recorded when its decision is.
        assert intr.value["action_requests"][0]["name"] == "issue_refund"
        outcomes = await _race(agent, config, {"decisions": [{"type": "approve"}]})
        assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    assert ran == [{"order_id": "1001", "amount": 25.0}]
    request_id = await scalar_at(
        database_url, "select id from approval_requests where call_id = 'r1'"
    )
    # Recorded server-side as the application's decision, once, and audited.
    assert (
        await scalar_at(
            database_url, "select count(*) from decisions where request_id = %s", request_id
        )
        == 1
    )
    assert (
        await scalar_at(
            database_url, "select principal from decisions where request_id = %s", request_id
        )
        == "app:shop"
    )
    assert (
        await scalar_at(
            database_url,
            "select count(*) from tool_executions where call_id = 'r1' and status = 'succeeded'",
        )
        == 1
    )


async def test_a_decision_made_in_the_inbox_is_what_the_next_resume_reads(
    database_url: str,
) -> None:
    """``resume_decisions="refuse"``: a resume value is never a decision; the approver's
    stored decision is."""
    ran: list[dict[str, Any]] = []
    async with local_approvals(database_url) as local:
        middleware = ApprovalMiddleware(
            interrupt_on={"issue_refund": True}, local=local, resume_decisions="refuse"
        )
        agent = _refund_agent(middleware, ran)
        config, intr = await _paused(agent)
        assert intr.value["type"] == "tool_approval"
        with pytest.raises(DecisionsOnlyThroughEngine):
            await agent.ainvoke(Command(resume={"type": "approve"}), config)
        assert ran == []


async def test_a_reject_without_a_message_gets_hitls_default_text() -> None:
    ran: list[dict[str, Any]] = []
    local = LocalApprovals.in_memory()
    agent = _refund_agent(ApprovalMiddleware(interrupt_on={"issue_refund": True}, local=local), ran)
    config, _ = await _paused(agent)
    out = await agent.ainvoke(Command(resume={"decisions": [{"type": "reject"}]}), config)
    [message] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert message.status == "error"
    assert "User rejected the tool call for `issue_refund`" in str(message.content)
    assert ran == []


def test_sync_invoke_works_in_process() -> None:
    ran: list[dict[str, Any]] = []
    agent = _refund_agent(
        ApprovalMiddleware(interrupt_on={"issue_refund": True}, interrupt_mode="per_call"), ran
    )
    config = {"configurable": {"thread_id": "sync"}}
    [intr] = agent.invoke({"messages": [HumanMessage("refund")]}, config)["__interrupt__"]
    out = agent.invoke(Command(resume={intr.id: {"type": "approve"}}), config)
    assert ran == [{"order_id": "1001", "amount": 25.0}]
    assert out["messages"][-1].content.startswith("done: refunded 25.0")
    assert threading.active_count() >= 1


async def test_a_when_predicate_that_changes_its_mind_on_resume_never_runs_a_rejected_call() -> (
    None
):
    """HITL documents that a ``when`` returning False on resume skips the reviewer's answer
    and runs the tool, even if they rejected it. Here the request, once asked, is sticky."""
    ran: list[dict[str, Any]] = []
    asking = {"now": True}
    gate = {"allowed_decisions": ["approve", "reject"], "when": lambda _req: asking["now"]}
    agent = _refund_agent(
        ApprovalMiddleware(interrupt_on={"issue_refund": gate}, interrupt_mode="per_call"), ran
    )
    config, intr = await _paused(agent)
    assert intr.value["description"]
    asking["now"] = False
    out = await agent.ainvoke(
        Command(resume={intr.id: {"type": "reject", "message": "no"}}), config
    )
    assert ran == []
    [message] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert message.content == "User rejected the tool call for `issue_refund` with reason: no"
    assert message.additional_kwargs  # HITL's notification metadata (lc_source)


async def test_a_when_predicate_that_says_no_lets_the_call_run_unasked() -> None:
    ran: list[dict[str, Any]] = []
    gate = {
        "allowed_decisions": ["approve"],
        "when": lambda req: req.tool_call["args"]["amount"] > 100,
    }
    agent = _refund_agent(
        ApprovalMiddleware(interrupt_on={"issue_refund": gate}, interrupt_mode="per_call"), ran
    )
    out = await agent.ainvoke(
        {"messages": [HumanMessage("refund")]}, {"configurable": {"thread_id": "small"}}
    )
    assert "__interrupt__" not in out
    assert ran == [{"order_id": "1001", "amount": 25.0}]


def test_sync_invokes_racing_on_postgres_run_each_refund_once(database_url: str) -> None:
    """``invoke`` from threads, the database's pool on a loop of its own (as a sync
    application keeps it): several conversations at once, each raced by several resumes."""
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    opened = local_approvals(database_url)
    try:
        local = asyncio.run_coroutine_threadsafe(opened.__aenter__(), loop).result(30)
        conversations = []
        for _ in range(4):
            ran: list[dict[str, Any]] = []
            agent = _refund_agent(
                ApprovalMiddleware(interrupt_on={"issue_refund": True}, local=local), ran
            )
            config = {"configurable": {"thread_id": str(uuid.uuid4())}}
            agent.invoke({"messages": [HumanMessage("refund 1001")]}, config)
            conversations.append((agent, config, ran))
        start = threading.Barrier(16)
        errors: list[BaseException] = []

        def resume(agent: Any, config: Any) -> None:
            start.wait(10)
            try:
                agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
            except BaseException as exc:  # collected, asserted below
                errors.append(exc)

        racers = [
            threading.Thread(target=resume, args=(agent, config))
            for agent, config, _ in conversations
            for _ in range(4)
        ]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join(60)
        assert not any(r.is_alive() for r in racers)
        assert errors == []
        assert [len(ran) for _, _, ran in conversations] == [1, 1, 1, 1]
    finally:
        asyncio.run_coroutine_threadsafe(opened.__aexit__(None, None, None), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        runner.join(10)
        loop.close()


async def test_sync_invoke_in_the_loop_that_owns_the_database_is_refused_naming_the_fix(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The invoke runs the graph's steps in a thread of LangGraph's, which asks this (blocked)
    # loop for a sign of life: it gives up after OWNER_LOOP_TIMEOUT, 5 s, whose length is not
    # what this test is about.
    monkeypatch.setattr(in_process, "OWNER_LOOP_TIMEOUT", 0.2)
    async with local_approvals(database_url) as local:
        agent = _refund_agent(
            ApprovalMiddleware(
                interrupt_on={"issue_refund": True}, interrupt_mode="per_call", local=local
            ),
            [],
        )
        with pytest.raises(RuntimeError, match="ainvoke"):
            agent.invoke(
                {"messages": [HumanMessage("refund")]}, {"configurable": {"thread_id": "own"}}
            )
