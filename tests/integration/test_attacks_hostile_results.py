"""A LangGraph tool whose approved call returns what PostgreSQL cannot store (a NUL, a lone
surrogate): the engine must keep the run going after the tool ran, as the OpenAI-SDK host
does (graphs/openai_host/storable.py). It does not yet: the test is a strict xfail until
graphs/tool_step.py keeps such a result storable."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from graphs.agent import AgentGraph, build_agent
from graphs.deps import GraphDeps
from graphs.scripted import ScriptedChatModel
from graphs.tools import ToolCall, governed_tool
from web.engine import Engine

HOSTILE = "before\x00after \ud800 end"


def script(messages: list[BaseMessage]) -> AIMessage:
    if isinstance(messages[-1], ToolMessage):
        return AIMessage(content=f"tool said: {messages[-1].content}")
    return AIMessage(
        content="", tool_calls=[{"id": "note-1", "name": "fetch_note", "args": {"note_id": "1"}}]
    )


def build(deps: GraphDeps) -> AgentGraph:
    @governed_tool(sensitive=True)
    async def fetch_note(call: ToolCall, note_id: str) -> str:
        """Read a note someone else wrote."""
        return HOSTILE

    return build_agent(name="notes", model=ScriptedChatModel(script), tools=[fetch_note], deps=deps)


@pytest.mark.xfail(
    strict=True,
    reason=(
        "graphs/tool_step.py hands the tool's result to ledger.finish as it is: jsonb refuses"
        " U+0000, the call stays 'started' after it ran and the run fails with PostgreSQL's"
        " UntranslatableCharacter (not this helper's file to change)"
    ),
)
async def test_an_approved_langgraph_tool_returning_hostile_bytes_ends_its_run(
    engine: Engine,
) -> None:
    engine.registry._entries["lg_notes"] = "tests.integration.test_attacks_hostile_results:build"
    run = await engine.runner.start("lg_notes", {"message": "read note 1"}, principal="alice")
    assert run.status == "waiting", run
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    await engine.drain()
    ended = await engine.runs.get(run.run_id)
    assert ended is not None
    [execution] = await engine.ledger.for_run(run.run_id)
    assert ended.status == "completed", ended
    assert execution.status == "succeeded", execution
