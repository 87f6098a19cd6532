"""``run.tool_count`` counts the calls of the same model turn before a call, and what ran
before a pause: a rate limit ("a run sends at most three e-mails", examples/policies/
email.yaml) holds against an agent that puts five e-mails in one turn, in the engine's own
loop and under ``create_agent``'s middleware, and against one that sends them a turn at a
time through pauses in the OpenAI Agents SDK host (which counted from 0 again at each
resume). Before, five requests were opened and, approved, five e-mails went out."""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage

from approvals.policy import load_policy
from graphs.examples.demo import current_turn
from graphs.examples.email import POLICY, email_tools
from graphs.examples.scripted import ScriptedChatModel, ScriptedToolModel
from graphs.hooks.governance import Governance
from graphs.hosts.langgraph.agent import build_agent
from graphs.langchain.middleware import ApprovalMiddleware
from graphs.tool_call.deps import GraphDeps
from tests.integration.helpers import scalar
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")


def burst_script(messages: list[BaseMessage]) -> AIMessage:
    """``mail N``: N e-mails in one turn, then a summary."""
    text, results = current_turn(messages)
    if results:
        return AIMessage(content=f"{len(results)} results")
    n = int(re.findall(r"\d+", text)[0])
    return AIMessage(
        content="",
        tool_calls=[
            {
                "id": f"mail-{i}",
                "name": "send_email",
                "args": {"to": f"user{i}@example.com", "subject": f"s{i}", "body": f"hi {i}"},
            }
            for i in range(n)
        ],
    )


def openai_script(text: str, outputs: dict[str, Any]) -> tuple[list[Any], str]:
    """``mail N``: N e-mails in one turn; ``seq N``: one a turn."""
    n = int(re.findall(r"\d+", text)[0])

    def mail(i: int) -> tuple[str, str, dict[str, Any]]:
        args = {"to": f"user{i}@example.com", "subject": f"s{i}", "body": f"hi {i}"}
        return f"mail-{i}", "send_email", args

    if text.startswith("mail"):
        return ([mail(i) for i in range(n)], "") if not outputs else ([], "sent")
    return ([mail(len(outputs))], "") if len(outputs) < n else ([], "sent")


def burst_openai(deps: GraphDeps) -> Any:
    from agents import Agent, function_tool

    from graphs.examples.effects import side_effects
    from graphs.examples.openai_refund import ScriptedModel
    from graphs.hosts.openai import OpenAIAgent, current_call

    @function_tool
    async def send_email(to: str, subject: str, body: str) -> str:
        """Send an e-mail."""
        call = current_call()
        await side_effects(deps).record(
            run_id=call.run_id,
            call_id=call.call_id,
            tool="send_email",
            args={"to": to, "subject": subject, "body": body},
        )
        return f"sent to {to}"

    @function_tool
    async def draft_email(to: str, subject: str, body: str) -> str:
        """Draft an e-mail (never called here: the policy's draft rule needs the tool)."""
        return f"drafted to {to}"

    agent = Agent(
        name="burst_openai",
        model=ScriptedModel(openai_script),
        tools=[draft_email, send_email],
    )
    return OpenAIAgent(agent, governance=_governance(), max_turns=30)


def _governance() -> Governance:
    return Governance(interceptors=[load_policy(POLICY)], names=["policy:email"])


def burst_loop(deps: GraphDeps) -> Any:
    return build_agent(
        name="burst_loop",
        model=ScriptedChatModel(burst_script),
        tools=email_tools(deps),
        deps=deps,
        governance=_governance(),
    )


def burst_middleware(deps: GraphDeps) -> Any:
    return create_agent(
        ScriptedToolModel(script=burst_script),
        tools=[t.as_tool() for t in email_tools(deps)],
        middleware=[ApprovalMiddleware(governance=_governance())],
        checkpointer=deps.checkpointer,
        name="burst_middleware",
    )


async def approve_until_done(engine: Engine, run_id: str) -> None:
    for _ in range(20):
        pending = [r for r in await engine.requests.for_run(run_id) if r.status == "pending"]
        if not pending:
            return
        for request in pending:
            await engine.decide_as_operator(request.id, "approve", principal="bob")
        while await engine.drain():
            pass


@pytest.mark.parametrize("graph", ["burst_loop", "burst_middleware"])
async def test_five_mails_in_one_turn_send_three(engine: Engine, graph: str) -> None:
    engine.registry._entries[graph] = f"tests.integration.test_tool_counts:{graph}"
    out = await engine.runner.start(graph, {"message": "mail 5"}, principal="alice")
    # The first three are each the run's first, second and third: a human is asked; the
    # fourth and fifth are over the limit: denied, nobody asked.
    requests = await engine.requests.for_run(out.run_id)
    assert sorted(r.call_id for r in requests) == ["mail-0", "mail-1", "mail-2"]
    await approve_until_done(engine, out.run_id)
    await assert_sent_three(engine, out.run_id)


async def test_mails_a_turn_at_a_time_through_pauses_send_three_in_the_openai_host(
    engine: Engine,
) -> None:
    engine.registry._entries["burst_openai"] = "tests.integration.test_tool_counts:burst_openai"
    out = await engine.runner.start("burst_openai", {"message": "seq 5"}, principal="alice")
    await approve_until_done(engine, out.run_id)
    await assert_sent_three(engine, out.run_id)


async def assert_sent_three(engine: Engine, run_id: str) -> None:
    run = await engine.runs.get(run_id)
    assert run is not None
    assert run.status == "completed", run
    sent = await scalar(
        engine,
        "SELECT array_agg(call_id ORDER BY call_id) FROM demo_side_effects"
        " WHERE run_id = %s AND tool = 'send_email'",
        run_id,
    )
    assert sent == ["mail-0", "mail-1", "mail-2"]
