"""A LangGraph tool whose approved call returns what PostgreSQL cannot store (a NUL, a lone
surrogate): the tool already ran, so the run must go on, with the result kept as visible
escapes (graphs/tool_call/storable.py, as the OpenAI-SDK host does). Before, the ledger refused the
result, the call stayed 'started' after it ran and the run failed with PostgreSQL's error."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from graphs.examples.scripted import ScriptedChatModel
from graphs.hosts.langgraph.agent import AgentGraph, build_agent
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.tools import ToolCall, governed_tool
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
    assert execution.result == "before\\u0000after \\ud800 end"
    assert ended.answer is not None
    # The model read the result as JSON text: the escapes, never the raw characters.
    assert "\x00" not in ended.answer
    assert "u0000after" in ended.answer
