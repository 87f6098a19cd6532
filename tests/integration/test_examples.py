"""The example agents are ordinary langchain ``create_agent`` agents governed by
``ApprovalMiddleware``, and keep what they did as ``build_agent`` graphs: the same policy, the
same tools with their conditions, the same calls and answers. ``build_classic`` is still the
``build_agent`` version, and holds the same conversation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from web.engine import Engine, open_engine
from web.settings import Settings

CLASSIC = {
    "refund_classic": "graphs.examples.refund:build_classic",
    "email_classic": "graphs.examples.email:build_classic",
}

CONVERSATIONS = {
    "refund": ("Please refund order 1001", "refund-1001", "Refunded 25.00 on order 1001."),
    "email": (
        "Email bob@example.com about the quarterly report",
        "send-1",
        'Sent "the quarterly report" to bob@example.com.',
    ),
}


@pytest.fixture
async def both(database_url: str, tmp_path: Path) -> AsyncIterator[Engine]:
    settings = Settings(
        database_url=database_url, config_file=tmp_path / "none.toml", graphs=CLASSIC
    )
    async with open_engine(database_url, settings) as engine:
        yield engine


@pytest.mark.parametrize("name", ["refund", "email"])
async def test_the_registered_examples_are_create_agent_agents_with_approval_middleware(
    engine: Engine, name: str
) -> None:
    graph = engine.registry.get(name)
    # create_agent's nodes, with the middleware's hook among them.
    assert {"model", "tools", "ApprovalMiddleware.before_agent"} <= set(graph.nodes)
    governance = engine.registry.governance(name)
    assert governance is not None
    assert list(governance.names) == [f"policy:{name}"]


async def test_the_refund_tool_keeps_its_validation_and_conditions(engine: Engine) -> None:
    tools = {t.name: t for t in engine.registry.tools("refund")}
    assert set(tools) == {"lookup_order", "issue_refund"}
    refund = tools["issue_refund"]
    assert refund.sensitive
    assert refund.risk == "high"
    assert refund.approver_group == "finance"
    assert [c.name for c in refund.preconditions] == ["order_is_paid", "amount_within_paid"]
    assert [c.name for c in refund.postconditions] == ["refund_has_an_id"]
    assert refund.args_schema()["properties"]["order_id"]["pattern"] == r"^\d{4}$"


async def _converse(engine: Engine, graph: str, message: str) -> tuple[str, Any, str]:
    """Start a run, approve its one request, resume it: the request's call id, the side
    effects of that call and the agent's final answer."""
    outcome = await engine.runner.start(graph, {"message": message}, principal="alice")
    assert outcome.status == "waiting", outcome
    assert len(outcome.pending) == 1
    request = await engine.requests.get(outcome.pending[0])
    assert request is not None
    await engine.decide_as_operator(request.id, "approve", principal="bob")
    assert await engine.worker.drain() == 1
    run = await engine.runs.get(outcome.run_id)
    assert run is not None
    assert run.status == "completed"
    effects = await engine.effects.for_call(outcome.run_id, request.call_id)
    return request.call_id, effects, str(run.answer)


@pytest.mark.parametrize("name", ["refund", "email"])
async def test_the_example_and_its_classic_build_hold_the_same_conversation(
    both: Engine, name: str
) -> None:
    message, call_id, answer = CONVERSATIONS[name]
    agent = await _converse(both, name, message)
    classic = await _converse(both, f"{name}_classic", message)
    assert agent[0] == classic[0] == call_id
    # The approved call ran once in each, with the same arguments.
    assert len(agent[1]) == len(classic[1]) == 1
    assert agent[1][0]["args"] == classic[1][0]["args"]
    assert agent[2] == classic[2] == answer
