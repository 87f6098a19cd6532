"""Standing grants in the LangGraph hosts: the same grant decides later calls in a
``create_agent`` graph (``ApprovalMiddleware``) and in the engine's own loop (``build_agent``),
since the approval slot every host asks holds the grant check; on real PostgreSQL with a
scripted model, decided through the engine and resumed in a worker."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage

from approvals.policy import parse_policy
from graphs.examples.demo import current_turn
from graphs.examples.effects import side_effects
from graphs.examples.scripted import ScriptedChatModel, ScriptedToolModel
from graphs.hooks.governance import Governance
from graphs.hosts.langgraph.agent import build_agent
from graphs.langchain.middleware import ApprovalMiddleware
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.tools import GovernedTool, ToolCall, governed_tool
from tests.integration.helpers import events_of
from tests.integration.test_standing_grants import pending_of, ran, requests_of
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")

HERE = "tests.integration.test_standing_grants_langgraph"


def script(messages: list[BaseMessage]) -> AIMessage:
    """The message names the amounts (``50 60 500``): one ``pay`` call a turn, in order."""
    text, results = current_turn(messages)
    amounts = text.split()
    if len(results) < len(amounts):
        index = len(results)
        call = {"id": f"c{index}", "name": "pay", "args": {"amount": float(amounts[index])}}
        return AIMessage(content="", tool_calls=[call])
    return AIMessage(content="done")


def tools(deps: GraphDeps) -> list[GovernedTool]:
    @governed_tool()
    async def pay(call: ToolCall, amount: float) -> str:
        """Pay an amount."""
        await side_effects(deps).record(
            run_id=call.run_id, call_id=call.call_id, tool="pay", args={"amount": amount}
        )
        return f"paid {amount}"

    return [pay]


POLICY = """
policy: grants
default: allow
rules:
  - id: pay-needs-approval
    point: pre_tool_call
    tool: pay
    action: escalate
    allow_always:
      within:
        amount: {max: 100}
"""


def governance() -> Governance:
    return Governance(interceptors=[parse_policy(POLICY)], names=["policy:grants"])


def with_middleware(deps: GraphDeps) -> Any:
    return create_agent(
        ScriptedToolModel(script=script),
        tools=[t.as_tool() for t in tools(deps)],
        middleware=[ApprovalMiddleware(governance=governance())],
        checkpointer=deps.checkpointer,
        name="granted_lg",
    )


def classic(deps: GraphDeps) -> Any:
    return build_agent(
        name="granted_classic",
        model=ScriptedChatModel(script),
        tools=tools(deps),
        deps=deps,
        governance=governance(),
    )


@pytest.mark.parametrize("graph", ["with_middleware", "classic"])
async def test_a_grant_decides_later_calls_until_an_operator_revokes_it(
    engine: Engine, graph: str
) -> None:
    engine.registry._entries[graph] = f"{HERE}:{graph}"
    run = await engine.runner.start(graph, {"message": "50 60 500 70"}, principal="alice")
    [first] = await pending_of(engine, run.run_id)
    await engine.decide_as_operator(first, "approve", principal="bob", always=True)
    await engine.drain()
    # 60 ran on the grant; 500 is outside its bounds and asks.
    assert [c for c, _, _ in await ran(engine, run.run_id)] == ["c0", "c1"]
    [used] = await events_of(engine, run.run_id, "grant.used")
    assert used["call_id"] == "c1"
    [outside] = await pending_of(engine, run.run_id)
    [grant] = await engine.grants_of(run.run_id, by="ops")
    await engine.revoke_grant(grant.id, by="cli:ops")
    await engine.decide_as_operator(outside, "approve", principal="bob")
    await engine.drain()
    # 70 is within the bounds, but the grant is revoked: it asks again.
    assert [c for c, _, _ in await ran(engine, run.run_id)] == ["c0", "c1", "c2"]
    assert len(await pending_of(engine, run.run_id)) == 1
    assert await requests_of(engine, run.run_id) == 3
