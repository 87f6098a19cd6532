"""An OpenAI-SDK agent with an MCP server (a real stdio server in its own process,
``tests.integration.mcp_records_server``), hosted by the engine on real PostgreSQL with a
scripted model: MCP tools pass through the policy like function tools, the server's
``require_approval`` is an escalation, the decision is read from the database, each approved
call runs once, and the connection is open only while a run step runs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import Agent
from agents.mcp import MCPServerStdio

from graphs.examples.openai_refund import ScriptedModel
from graphs.hooks.governance import Governance
from graphs.hosts.openai import OpenAIAgent
from graphs.tool_call.deps import GraphDeps
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")

HERE = "tests.integration.test_openai_mcp"
ROOT = Path(__file__).resolve().parents[2]

#: The server object of the agent last built, to look at its connection.
BUILT: dict[str, Any] = {}


def records_server() -> MCPServerStdio:
    return MCPServerStdio(
        params={
            "command": sys.executable,
            "args": ["-m", "tests.integration.mcp_records_server"],
            "env": {
                "MCP_CALLS_FILE": os.environ["MCP_CALLS_FILE"],
                "PYTHONPATH": str(ROOT),
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            },
            "cwd": str(ROOT),
        },
        name="records",
        require_approval={"always": {"tool_names": ["delete_record"]}},
        client_session_timeout_seconds=30,
    )


def script(text: str, outputs: dict[str, Any]) -> tuple[list[Any], str]:
    """Read record 7, then delete it, then say what the tools answered."""
    if "m1" not in outputs:
        return [("m1", "read_record", {"record_id": "7"})], ""
    if "m2" not in outputs:
        return [("m2", "delete_record", {"record_id": "7"})], ""
    return [], f"read: {outputs['m1']} | delete: {outputs['m2']}"


def records_agent(deps: GraphDeps) -> Agent[Any]:
    server = records_server()
    BUILT["server"] = server
    return Agent(name="records", model=ScriptedModel(script), mcp_servers=[server])


class DenyDelete:
    """A policy of our own: no record 7 is ever deleted."""

    def intercept(self, context: dict[str, Any], /) -> Any:
        from agent_hooks import Verdict

        call = context.get("tool_call") or {}
        if call.get("name") == "delete_record" and call.get("args", {}).get("record_id") == "7":
            return Verdict.deny(reason="protected", message="record 7 is protected")
        return Verdict.allow()


def denied_agent(deps: GraphDeps) -> OpenAIAgent:
    agent = Agent(name="records", model=ScriptedModel(script), mcp_servers=[records_server()])
    return OpenAIAgent(agent, governance=Governance(interceptors=[DenyDelete()], names=["deny"]))


@pytest.fixture
def calls_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "mcp-calls.jsonl"
    path.touch()
    monkeypatch.setenv("MCP_CALLS_FILE", str(path))
    return path


def ran(path: Path) -> list[tuple[str, str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [(c["tool"], c["record_id"]) for c in map(json.loads, lines)]


async def test_an_mcp_tool_that_requires_approval_pauses_and_runs_once_approved(
    engine: Engine, calls_file: Path
) -> None:
    engine.registry._entries["mcp_records"] = f"{HERE}:records_agent"
    run = await engine.runner.start("mcp_records", {"message": "go"}, principal="alice")
    assert run.status == "waiting", run
    [request_id] = run.pending
    request = await engine.requests.get(request_id)
    assert request is not None
    assert request.tool == "delete_record"
    assert request.shown["args"] == {"record_id": "7"}
    # The read needed no approval and ran; the delete did not; the connection is closed.
    assert ran(calls_file) == [("read_record", "7")]
    assert BUILT["server"].session is None

    await engine.decide_as_operator(request_id, "approve", principal="bob")
    await engine.drain()
    finished = await engine.runs.get(run.run_id)
    assert finished is not None
    assert finished.status == "completed", finished
    assert finished.answer is not None
    assert "record 7 deleted" in finished.answer
    assert ran(calls_file) == [("read_record", "7"), ("delete_record", "7")]
    [execution] = [e for e in await engine.ledger.for_run(run.run_id) if e.call_id == "m2"]
    assert execution.status == "succeeded"
    assert BUILT["server"].session is None


async def test_a_rejected_mcp_call_never_reaches_the_server(
    engine: Engine, calls_file: Path
) -> None:
    engine.registry._entries["mcp_records_rejected"] = f"{HERE}:records_agent"
    run = await engine.runner.start("mcp_records_rejected", {"message": "go"}, principal="alice")
    await engine.decide_as_operator(run.pending[0], "reject", principal="bob", reason="keep it")
    await engine.drain()
    finished = await engine.runs.get(run.run_id)
    assert finished is not None
    assert finished.status == "completed", finished
    assert finished.answer is not None
    assert "keep it" in finished.answer
    assert ran(calls_file) == [("read_record", "7")]


async def test_a_policy_deny_wins_over_the_servers_require_approval(
    engine: Engine, calls_file: Path
) -> None:
    engine.registry._entries["mcp_records_denied"] = f"{HERE}:denied_agent"
    run = await engine.runner.start("mcp_records_denied", {"message": "go"}, principal="alice")
    assert run.status == "completed", run
    assert run.pending == []
    assert run.answer is not None
    assert "record 7 is protected" in run.answer
    assert ran(calls_file) == [("read_record", "7")]
