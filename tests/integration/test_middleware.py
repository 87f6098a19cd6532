"""A langchain ``create_agent`` agent governed by ``ApprovalMiddleware`` gets the engine's
guarantees: the request is recorded before the pause, the decision is read from the database,
the tool runs once, rejections and edits reach the model, on real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langchain_mcp_adapters.tools import load_mcp_tools
from langgraph.types import Command
from mcp.server.fastmcp import FastMCP
from mcp.shared.memory import create_connected_server_and_client_session

from approvals.errors import (
    ConfigurationError,
    EditedArgumentsInvalid,
    GraphLoadError,
    InvalidDecision,
    InvalidRunInput,
    ThreadBusy,
)
from approvals.identity import idempotency_key
from approvals.model import DecisionRecord, ExecutionStatus
from graphs import ApprovalMiddleware
from graphs.langchain.tools import from_langchain
from graphs.run.config import engine_configurable
from tests.integration import middleware_graphs
from tests.integration.helpers import scalar, side_effects
from tests.integration.inprocess import invoke
from tests.integration.processes import cli, spawn
from tests.waiting import eventually
from web.engine import Engine, open_engine
from web.settings import Settings

GRAPHS = {
    "lc_refund": "tests.integration.middleware_graphs:build",
    "lc_tools": "tests.integration.middleware_graphs:build_tools",
}


@pytest.fixture
async def lc(database_url: str, tmp_path: Path) -> Any:
    settings = Settings(
        database_url=database_url, config_file=tmp_path / "none.toml", graphs=GRAPHS
    )
    async with open_engine(database_url, settings) as engine:
        yield engine


async def _start(engine: Engine, message: str, graph: str = "lc_refund") -> Any:
    out = await engine.runner.start(graph, {"message": message}, principal="alice")
    assert out.status == "waiting", out
    return out


async def test_a_gated_call_waits_with_its_request_recorded_and_runs_once_after_approval(
    lc: Engine,
) -> None:
    out = await _start(lc, "refund 1001 25")
    [request_id] = out.pending
    request = await lc.requests.get(request_id)
    assert request is not None
    assert request.tool == "issue_refund"
    # What the model set, nothing injected: no call id, no state, no runtime.
    assert request.shown["args"] == {"order_id": "1001", "amount": 25.0}
    assert set(request.args_schema["properties"]) == {"order_id", "amount"}
    assert await side_effects(lc, out.run_id, "refund-1001") == []

    await lc.decide_as_operator(request_id, "approve", principal="bob")
    assert await lc.worker.drain() == 1

    run = await lc.runs.get(out.run_id)
    assert run is not None
    assert run.status == "completed", run
    assert run.answer == "success: refunded 25.00 on 1001"
    effects = await side_effects(lc, out.run_id, "refund-1001")
    assert len(effects) == 1
    assert effects[0]["args"]["amount"] == 25.0
    # The key the tool can pass on: the same for every attempt at this call.
    key = idempotency_key(run_id=out.run_id, call_id="refund-1001")
    assert effects[0]["args"]["key"] == key
    executions = await scalar(
        lc, "select count(*) from tool_executions where run_id = %s", out.run_id
    )
    assert executions == 1


async def test_a_rejection_reaches_the_model_with_its_reason_and_nothing_runs(lc: Engine) -> None:
    out = await _start(lc, "refund 1001 25")
    await lc.decide_as_operator(
        out.pending[0], "reject", principal="bob", reason="over the monthly limit"
    )
    await lc.worker.drain()
    run = await lc.runs.get(out.run_id)
    assert run is not None
    assert run.status == "completed"
    assert run.answer is not None
    assert run.answer.startswith("error: ")
    # HumanInTheLoopMiddleware's words (who decided is in the audit log).
    assert run.answer == (
        "error: User rejected the tool call for `issue_refund` with reason: over the monthly limit"
    )
    assert await side_effects(lc, out.run_id, "refund-1001") == []
    assert await lc.ledger.for_run(out.run_id) == []


async def test_an_edit_runs_the_edited_arguments_only(lc: Engine) -> None:
    out = await _start(lc, "refund 1001 25")
    await lc.decide_as_operator(
        out.pending[0], "approve", principal="bob", args={"order_id": "1001", "amount": 10}
    )
    await lc.worker.drain()
    run = await lc.runs.get(out.run_id)
    assert run is not None
    assert run.status == "completed", run
    # HumanInTheLoopMiddleware's edit notice, then the result.
    assert run.answer is not None
    assert "Executed instead: issue_refund" in run.answer
    assert run.answer.endswith("Tool response:\nrefunded 10.00 on 1001")
    [effect] = await side_effects(lc, out.run_id, "refund-1001")
    assert effect["args"]["amount"] == 10.0


async def test_an_edit_is_validated_against_what_the_model_may_set(lc: Engine) -> None:
    out = await _start(lc, "refund 1001 25")
    with pytest.raises(EditedArgumentsInvalid):
        await lc.decide_as_operator(
            out.pending[0], "approve", principal="bob", args={"order_id": "1001", "amount": "lots"}
        )
    request = await lc.requests.get(out.pending[0])
    assert request is not None
    assert request.status == "pending"


async def test_calls_of_one_turn_are_decided_independently(lc: Engine) -> None:
    out = await _start(lc, "refund 1001 25 and 1002 40")
    assert len(out.pending) == 2
    by_call = {}
    for request_id in out.pending:
        request = await lc.requests.get(request_id)
        assert request is not None
        by_call[request.call_id] = request_id
    await lc.decide_as_operator(by_call["refund-1002"], "reject", principal="bob", reason="no")
    await lc.worker.drain()
    run = await lc.runs.get(out.run_id)
    assert run is not None
    assert run.status == "waiting"
    assert await side_effects(lc, out.run_id, "refund-1002") == []
    await lc.decide_as_operator(by_call["refund-1001"], "approve", principal="bob")
    await lc.worker.drain()
    run = await lc.runs.get(out.run_id)
    assert run is not None
    assert run.status == "completed", run
    assert len(await side_effects(lc, out.run_id, "refund-1001")) == 1
    assert await side_effects(lc, out.run_id, "refund-1002") == []


async def test_two_workers_draining_at_once_run_each_approved_call_once(
    lc: Engine, database_url: str, tmp_path: Path
) -> None:
    runs = [await _start(lc, "refund 1001 25") for _ in range(6)]
    for out in runs:
        await lc.decide_as_operator(out.pending[0], "approve", principal="bob")
    settings = Settings(
        database_url=database_url, config_file=tmp_path / "none.toml", graphs=GRAPHS
    )
    async with open_engine(database_url, settings) as other:
        counts = await asyncio.gather(lc.worker.drain(), other.worker.drain())
    assert sum(counts) == 6
    for out in runs:
        assert len(await side_effects(lc, out.run_id, "refund-1001")) == 1
        run = await lc.runs.get(out.run_id)
        assert run is not None
        assert run.status == "completed"


async def test_racing_decisions_have_one_winner_and_agree_with_what_ran(lc: Engine) -> None:
    for _ in range(4):
        out = await _start(lc, "refund 1001 25")
        results = await asyncio.gather(
            lc.decide_as_operator(out.pending[0], "approve", principal="ann"),
            lc.decide_as_operator(out.pending[0], "reject", principal="rob", reason="no"),
            return_exceptions=True,
        )
        won = [r for r in results if not isinstance(r, BaseException)]
        assert len(won) == 1
        assert isinstance(won[0], DecisionRecord)
        await lc.worker.drain()
        ran = len(await side_effects(lc, out.run_id, "refund-1001"))
        assert ran == (1 if won[0].kind == "approve" else 0)


async def test_a_resume_value_is_not_a_decision(lc: Engine) -> None:
    """Resuming the thread by hand with an "approve" answer, as HumanInTheLoopMiddleware
    would take it, runs nothing: the decision is read from the database."""
    out = await _start(lc, "refund 1001 25")
    graph = lc.registry.get("lc_refund")
    config: RunnableConfig = {"configurable": {"thread_id": out.thread_id}}
    state = await graph.aget_state(config)
    [interrupt] = [i for t in state.tasks for i in t.interrupts]
    forged = {"decisions": [{"type": "approve"}]}
    holder_config: RunnableConfig = {
        "configurable": {
            "thread_id": out.thread_id,
            **engine_configurable(
                run_id=out.run_id, principal="alice", graph="lc_refund", deps=lc.registry.deps
            ),
        }
    }
    result = await graph.ainvoke(Command(resume={interrupt.id: forged}), holder_config)
    assert result["__interrupt__"]
    assert await side_effects(lc, out.run_id, "refund-1001") == []


async def test_a_sync_tool_runs_and_a_json_schema_tool_is_validated_before_anyone_is_asked(
    lc: Engine,
) -> None:
    looked = await lc.runner.start("lc_tools", {"message": "look abc"}, principal="alice")
    assert looked.status == "completed", looked
    assert looked.answer is not None
    assert json.loads(looked.answer.removeprefix("success: ")) == {"word": "abc", "length": 3}
    # Not gated: nobody was asked, and it ran once, recorded.
    [execution] = await lc.ledger.for_run(looked.run_id)
    assert execution.status == "succeeded"
    bad = await lc.runner.start("lc_tools", {"message": "mcp 500"}, principal="alice")
    assert bad.status == "completed", bad
    assert bad.answer is not None
    assert "invalid_arguments" in bad.answer
    assert "500 is greater than the maximum of 100" in bad.answer
    assert await scalar(lc, "select count(*) from approval_requests") == 0


async def test_a_json_schema_tool_waits_and_runs_its_edited_arguments(lc: Engine) -> None:
    out = await _start(lc, "mcp 5", graph="lc_tools")
    request = await lc.requests.get(out.pending[0])
    assert request is not None
    assert request.shown["args"] == {"n": 5}
    assert request.args_schema["properties"] == {"n": {"type": "integer", "maximum": 100}}
    with pytest.raises(EditedArgumentsInvalid):
        await lc.decide_as_operator(out.pending[0], "approve", principal="bob", args={"n": 101})
    await lc.decide_as_operator(out.pending[0], "approve", principal="bob", args={"n": 41})
    await lc.worker.drain()
    run = await lc.runs.get(out.run_id)
    assert run is not None
    assert run.answer is not None
    assert run.answer.endswith('Tool response:\n{"n": 42}')
    [effect] = await side_effects(lc, out.run_id, "add-1")
    assert effect["args"] == {"n": 41}


async def test_an_agent_invoked_outside_the_engine_pauses_in_process_not_in_the_engine(
    lc: Engine,
) -> None:
    """Invoked by the application itself, the agent pauses as HumanInTheLoopMiddleware does,
    in its own ``LocalApprovals`` (in memory here): nothing reaches the engine's tables, and no
    resume value ever decides a run the engine hosts."""
    graph = lc.registry.get("lc_refund")
    out = await graph.ainvoke(
        {"messages": [{"role": "user", "content": "refund 1001 25"}]},
        {"configurable": {"thread_id": "by-hand"}},
    )
    [intr] = out["__interrupt__"]
    assert intr.value["action_requests"][0]["name"] == "issue_refund"
    assert await scalar(lc, "select count(*) from approval_requests") == 0


async def test_a_graph_with_no_approval_boundary_is_refused_naming_the_fix(
    database_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        database_url=database_url,
        config_file=tmp_path / "none.toml",
        graphs={"shop": "tests.integration.middleware_graphs:plain_agent"},
    )
    async with open_engine(database_url, settings) as engine:
        with pytest.raises(GraphLoadError, match="ApprovalMiddleware") as refused:
            await engine.runner.start("shop", {"message": "refund 1001 25"}, principal="ann")
        assert "ungoverned" in str(refused.value)
        assert await scalar(engine, "select count(*) from runs") == 0


async def test_a_compiled_agent_without_a_checkpointer_gets_the_engines_and_pauses(
    database_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        database_url=database_url,
        config_file=tmp_path / "none.toml",
        graphs={
            "shop": "tests.integration.middleware_graphs:governed_agent",
            "free": "tests.integration.middleware_graphs:marked_agent",
        },
    )
    async with open_engine(database_url, settings) as engine:
        [listed] = engine.registry.tools("shop")
        assert listed.name == "refund_anything"
        assert listed.sensitive
        out = await _start(engine, "refund 1001 25", graph="shop")
        await engine.decide_as_operator(out.pending[0], "approve", principal="bob")
        await engine.worker.drain()
        run = await engine.runs.get(out.run_id)
        assert run is not None
        assert run.answer == "success: refunded 25.00 on 1001"
        [execution] = await engine.ledger.for_run(out.run_id)
        assert execution.status == "succeeded"
        # Registered explicitly as ungoverned: it runs, with nothing asked or recorded.
        free = await engine.runner.start("free", {"message": "refund 1001 25"}, principal="ann")
        assert free.status == "completed"
        assert await engine.ledger.for_run(free.run_id) == []


HOOKS = {
    name: f"tests.integration.middleware_graphs:{name}"
    for name in (
        "deny_input",
        "escalate_input",
        "mask_output",
        "deny_output",
        "escalate_output",
        "deny_tool_calls",
    )
}


@pytest.fixture
async def hooked(database_url: str, tmp_path: Path) -> Any:
    settings = Settings(
        database_url=database_url,
        config_file=tmp_path / "none.toml",
        graphs={**GRAPHS, **HOOKS},
    )
    async with open_engine(database_url, settings) as engine:
        yield engine


async def _pending(engine: Engine, run_id: str) -> list[Any]:
    return [r for r in await engine.requests.for_run(run_id) if r.status == "pending"]


async def _approve_all(engine: Engine, run_id: str) -> Any:
    """Approve what the run waits on until it stops waiting."""
    for _ in range(5):
        run = await engine.runs.get(run_id)
        assert run is not None
        if run.status != "waiting":
            return run
        for request in await _pending(engine, run_id):
            await engine.decide_as_operator(request.id, "approve", principal="bob")
        await engine.worker.drain()
    raise AssertionError("the run kept waiting")


async def test_one_run_emits_every_point_once_in_order_across_its_pause(lc: Engine) -> None:
    out = await _start(lc, "refund 1001 25")
    await _approve_all(lc, out.run_id)
    rows = await lc.audit.interceptions(out.run_id)
    assert [r["sequence"] for r in rows] == sorted({r["sequence"] for r in rows})
    assert {r["session_id"] for r in rows} == {out.run_id}
    assert [r["point"] for r in rows] == [
        "agent_startup",
        "input",
        "pre_model_call",
        "post_model_call",
        "pre_tool_call",  # recorded once, when decided
        "post_tool_call",
        "pre_model_call",
        "post_model_call",
        "output",
        "agent_shutdown",
    ]
    assert (rows[4]["decision"], rows[4]["resolved_by"]) == ("allow", "approval")


async def test_a_denied_input_blocks_the_run_before_the_agent_sees_it(hooked: Engine) -> None:
    out = await hooked.runner.start("deny_input", {"message": "refund 1004 25"}, principal="a")
    assert out.status == "blocked", out
    assert out.error is not None
    assert "order 1004 is under review" in out.error
    graph = hooked.registry.get("deny_input")
    state = await graph.aget_state({"configurable": {"thread_id": out.thread_id}})
    assert not state.values


async def test_an_input_a_human_must_read_pauses_the_agent_until_approved(hooked: Engine) -> None:
    out = await hooked.runner.start(
        "escalate_input", {"message": "refund 1005 25"}, principal="alice"
    )
    assert out.status == "waiting", out
    [request] = await _pending(hooked, out.run_id)
    assert request.tool == "@input"
    await hooked.decide_as_operator(request.id, "approve", principal="bob")
    await hooked.worker.drain()
    # Past the input, the refund itself waits for its own decision.
    [refund] = await _pending(hooked, out.run_id)
    assert refund.tool == "issue_refund"
    run = await _approve_all(hooked, out.run_id)
    assert run.status == "completed"
    assert len(await side_effects(hooked, out.run_id, "refund-1005")) == 1


async def test_a_rejected_input_ends_the_run_blocked_without_the_message(hooked: Engine) -> None:
    out = await hooked.runner.start(
        "escalate_input", {"message": "refund 1005 25"}, principal="alice"
    )
    [request] = await _pending(hooked, out.run_id)
    await hooked.decide_as_operator(request.id, "reject", principal="bob", reason="no")
    await hooked.worker.drain()
    run = await hooked.runs.get(out.run_id)
    assert run is not None
    assert run.status == "blocked", run
    graph = hooked.registry.get("escalate_input")
    state = await graph.aget_state({"configurable": {"thread_id": out.thread_id}})
    assert state.values["messages"] == []


async def test_the_answer_reaches_the_caller_only_as_output_left_it(hooked: Engine) -> None:
    out = await hooked.runner.start("mask_output", {"message": "refund 1001 25"}, principal="a")
    run = await _approve_all(hooked, out.run_id)
    assert run.answer == "success: refunded #.## on 1001"
    graph = hooked.registry.get("mask_output")
    state = await graph.aget_state({"configurable": {"thread_id": out.thread_id}})
    assert "25.00" not in state.values["messages"][-1].content


async def test_a_denied_answer_blocks_the_run_and_is_kept_nowhere(hooked: Engine) -> None:
    out = await hooked.runner.start("deny_output", {"message": "refund 1001 25"}, principal="a")
    run = await _approve_all(hooked, out.run_id)
    assert run.status == "blocked", run
    assert run.error is not None
    assert "the answer is withheld" in run.error
    graph = hooked.registry.get("deny_output")
    async for snapshot in graph.aget_state_history({"configurable": {"thread_id": out.thread_id}}):
        for m in snapshot.values.get("messages", []):
            assert "refunded 25.00" not in str(m.content) or m.type == "tool"


async def test_an_answer_a_human_must_read_waits_for_approval(hooked: Engine) -> None:
    out = await hooked.runner.start("escalate_output", {"message": "refund 1001 25"}, principal="a")
    await hooked.decide_as_operator(out.pending[0], "approve", principal="bob")
    await hooked.worker.drain()
    [review] = await _pending(hooked, out.run_id)
    assert review.tool == "@output"
    run = await _approve_all(hooked, out.run_id)
    assert run.status == "completed"
    assert run.answer == "success: refunded 25.00 on 1001"


async def test_a_denied_model_response_never_enters_the_conversation(hooked: Engine) -> None:
    out = await hooked.runner.start("deny_tool_calls", {"message": "refund 1001 25"}, principal="a")
    assert out.status == "blocked", out
    assert out.error is not None
    assert "tools are switched off" in out.error
    assert await scalar(hooked, "select count(*) from approval_requests") == 0
    graph = hooked.registry.get("deny_tool_calls")
    state = await graph.aget_state({"configurable": {"thread_id": out.thread_id}})
    assert [m.type for m in state.values["messages"]] == ["human"]


@pytest.mark.parametrize(
    ("interrupt_on", "error"),
    [
        ({"t": {"allowed_decisions": ["approve"], "whenever": lambda r: True}}, ValueError),
        ({"t": {"allowed_decisions": ["approve"], "description": 42}}, TypeError),
        ({"t": {"allowed_decisions": ["maybe"]}}, ValueError),
        ({"t": "yes"}, TypeError),
    ],
)
def test_what_the_engine_cannot_honour_is_refused_when_the_agent_is_built(
    interrupt_on: dict[str, Any], error: type[Exception]
) -> None:
    """A malformed entry is refused when the agent is built, never after an approval."""
    with pytest.raises(error, match="interrupt_on"):
        ApprovalMiddleware(interrupt_on=interrupt_on)


async def test_a_run_stopped_by_an_interrupt_the_engine_did_not_create_fails_naming_the_node(
    database_url: str, tmp_path: Path
) -> None:
    """It used to say "waiting" with nothing pending, which nobody could ever decide."""
    settings = Settings(
        database_url=database_url,
        config_file=tmp_path / "none.toml",
        graphs={"asker": "tests.integration.middleware_graphs:own_interrupt"},
    )
    async with open_engine(database_url, settings) as engine:
        out = await engine.runner.start("asker", {"message": "which order?"}, principal="ann")
        assert out.status == "failed", out
        assert out.error is not None
        assert "interrupt() the engine did not create, in node tools" in out.error
        run = await engine.runs.get(out.run_id)
        assert run is not None
        assert run.status == "failed"
        # The thread is not left waiting on it: the conversation can go on.
        again = await engine.runner.start(
            "asker", {"message": "which order?"}, principal="ann", thread_id=out.thread_id
        )
        assert again.status == "failed", again


async def test_an_approval_inside_a_nested_agent_pauses_and_resumes_the_whole_run(
    database_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        database_url=database_url,
        config_file=tmp_path / "none.toml",
        graphs={"desk": "tests.integration.middleware_graphs:nested"},
    )
    async with open_engine(database_url, settings) as engine:
        assert [t.name for t in engine.registry.tools("desk")] == ["issue_refund"]
        out = await _start(engine, "refund 1001 25", graph="desk")
        [request_id] = out.pending
        assert await side_effects(engine, out.run_id, "refund-1001") == []
        await engine.decide_as_operator(request_id, "approve", principal="bob")
        assert await engine.worker.drain() == 1
        run = await engine.runs.get(out.run_id)
        assert run is not None
        assert run.status == "completed", run
        assert run.answer == "success: refunded 25.00 on 1001"
        assert len(await side_effects(engine, out.run_id, "refund-1001")) == 1


@pytest.fixture
async def nest(database_url: str, tmp_path: Path) -> Any:
    names = ("nested_deny_output", "nested_escalate_input", "nested_deny_input")
    settings = Settings(
        database_url=database_url,
        config_file=tmp_path / "none.toml",
        graphs={n: f"tests.integration.middleware_graphs:{n}" for n in names},
    )
    async with open_engine(database_url, settings) as engine:
        yield engine


async def test_a_deny_inside_a_nested_agent_blocks_the_run_its_parent_runs(nest: Engine) -> None:
    """The parent's state holds only messages: the run still ends blocked, not completed
    with the user's own message as its answer."""
    out = await _start(nest, "refund 1001 25", graph="nested_deny_output")
    await nest.decide_as_operator(out.pending[0], "approve", principal="bob")
    await nest.worker.drain()
    run = await nest.runs.get(out.run_id)
    assert run is not None
    assert run.status == "blocked", run
    assert run.error is not None
    assert "the answer is withheld" in run.error


async def test_a_nested_agents_input_is_governed_before_the_run_starts(nest: Engine) -> None:
    denied = await nest.runner.start(
        "nested_deny_input", {"message": "refund 1004 25"}, principal="a"
    )
    assert denied.status == "blocked", denied
    assert denied.error is not None
    assert "order 1004 is under review" in denied.error
    # An input a human must read is held by the runner (tests/integration/test_held_input.py).


@pytest.mark.parametrize("graph", ["tool_node_graph", "react_agent"])
async def test_a_governed_tool_node_pauses_and_runs_the_approved_call_once(
    database_url: str, tmp_path: Path, graph: str
) -> None:
    settings = Settings(
        database_url=database_url,
        config_file=tmp_path / "none.toml",
        graphs={graph: f"tests.integration.middleware_graphs:{graph}"},
    )
    async with open_engine(database_url, settings) as engine:
        [listed] = engine.registry.tools(graph)
        assert listed.sensitive
        assert set(listed.args_schema()["properties"]) == {"order_id", "amount"}
        out = await _start(engine, "refund 1001 25 and 1002 40", graph=graph)
        # A ToolNode given the whole state runs a turn's calls in one task: they may come up
        # for decision one after the other. Each is decided once, by its call id.
        decided = set()
        for _ in range(4):
            for request in await _pending(engine, out.run_id):
                if request.call_id == "refund-1001":
                    await engine.decide_as_operator(request.id, "approve", principal="bob")
                else:
                    await engine.decide_as_operator(
                        request.id, "reject", principal="bob", reason="fraud"
                    )
                decided.add(request.call_id)
            await engine.worker.drain()
        assert decided == {"refund-1001", "refund-1002"}
        run = await engine.runs.get(out.run_id)
        assert run is not None
        assert run.status == "completed", run
        assert run.answer is not None
        assert "success: refunded 25.00 on 1001" in run.answer
        assert "fraud" in run.answer
        assert len(await side_effects(engine, out.run_id, "refund-1001")) == 1
        assert await side_effects(engine, out.run_id, "refund-1002") == []


@pytest.mark.slow
async def test_a_worker_killed_during_a_middleware_tool_is_reconciled_never_rerun(
    lc: Engine, cli_env: dict[str, str]
) -> None:
    out = await _start(lc, "refund 1001 25")
    await lc.decide_as_operator(out.pending[0], "approve", principal="bob")
    env = {
        **cli_env,
        "APPROVALS_GRAPHS": json.dumps(GRAPHS),
        "PYTHONPATH": str(Path(__file__).parents[2]),
    }
    worker = await spawn({**env, "APPROVALS_DEMO_TOOL_DELAY": "120"}, "worker")
    # The refund went out; the tool has not returned, the ledger still says "started".
    await eventually(lambda: side_effects(lc, out.run_id, "refund-1001"), timeout=60)
    worker.send_signal(signal.SIGKILL)
    await worker.wait()
    [started] = await lc.ledger.for_run(out.run_id)
    assert started.status is ExecutionStatus.STARTED

    assert (await cli(env, "worker", "--drain")).json() == {"resumed": 1}
    [unknown] = await lc.ledger.for_run(out.run_id)
    assert unknown.status is ExecutionStatus.OUTCOME_UNKNOWN
    [reconcile] = await _pending(lc, out.run_id)
    assert reconcile.tool == "@reconcile:issue_refund"
    await lc.decide_as_operator(reconcile.id, "approve", principal="olga")
    # The recovery above was a process of its own; resuming the reconciled call needs none.
    assert (await invoke(env, "worker", "--drain")).json() == {"resumed": 1}
    run = await lc.runs.get(out.run_id)
    assert run is not None
    assert run.status == "completed", run
    assert len(await side_effects(lc, out.run_id, "refund-1001")) == 1  # never run again


async def test_an_mcp_tool_is_validated_by_its_schema_paused_and_run_once(
    database_url: str, tmp_path: Path
) -> None:
    """A real MCP server, in process, its tool loaded through langchain-mcp-adapters: a
    StructuredTool whose args_schema is the server's JSON schema."""
    server = FastMCP("shop", log_level="WARNING")
    refunds: list[tuple[str, float]] = []

    @server.tool()
    def issue_refund(order_id: str, amount: float) -> dict[str, Any]:
        """Refund money on an order."""
        refunds.append((order_id, amount))
        return {"refunded": amount, "order_id": order_id}

    settings = Settings(
        database_url=database_url,
        config_file=tmp_path / "none.toml",
        graphs={"mcp": "tests.integration.middleware_graphs:mcp_agent"},
    )
    async with (
        create_connected_server_and_client_session(server._mcp_server) as session,
        open_engine(database_url, settings) as engine,
    ):
        middleware_graphs.MCP_TOOLS[:] = await load_mcp_tools(session)
        try:
            out = await _start(engine, "refund 1001 25", graph="mcp")
            request = await engine.requests.get(out.pending[0])
            assert request is not None
            assert request.shown["args"] == {"order_id": "1001", "amount": 25}
            assert request.args_schema["properties"]["amount"] == {
                "title": "Amount",
                "type": "number",
            }
            with pytest.raises(EditedArgumentsInvalid):
                await engine.decide_as_operator(
                    out.pending[0], "approve", principal="bob", args={"order_id": "1001"}
                )
            await engine.decide_as_operator(
                out.pending[0],
                "approve",
                principal="bob",
                args={"order_id": "1001", "amount": 10},
            )
            assert refunds == []
            await engine.worker.drain()
            run = await engine.runs.get(out.run_id)
            assert run is not None
            assert run.status == "completed", run
            assert refunds == [("1001", 10.0)]
            assert run.answer is not None
            assert '"refunded": 10' in run.answer
        finally:
            middleware_graphs.MCP_TOOLS.clear()


async def test_a_run_takes_the_agents_own_input_and_state_fields(
    database_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        database_url=database_url,
        config_file=tmp_path / "none.toml",
        graphs={"shop": "tests.integration.middleware_graphs:shop_agent"},
    )
    async with open_engine(database_url, settings) as engine:
        given = {
            "messages": [{"role": "user", "content": "refund 1001 25"}],
            "customer_id": "c-7",
        }
        out = await engine.runner.start("shop", given, principal="alice")
        assert out.status == "waiting", out
        request = await engine.requests.get(out.pending[0])
        assert request is not None
        # Injected from the state: not the model's to set, not shown as a parameter.
        assert request.shown["args"] == {"order_id": "1001", "amount": 25.0}
        await engine.decide_as_operator(out.pending[0], "approve", principal="bob")
        await engine.worker.drain()
        [effect] = await side_effects(engine, out.run_id, "refund-1001")
        assert effect["args"]["customer_id"] == "c-7"
        run = await engine.runs.get(out.run_id)
        assert run is not None
        assert run.answer == "success: refunded 25.00 on 1001 to c-7"

        with pytest.raises(InvalidRunInput, match=r"unknown input field.*basket.*customer_id"):
            await engine.runner.start(
                "shop", {"message": "refund 1001 25", "basket": 3}, principal="alice"
            )
        bad: dict[str, Any]
        for bad in (
            {"messages": []},
            {"messages": [{"role": "assistant", "content": "hi"}]},
            {"message": "x", "messages": [{"role": "user", "content": "y"}]},
        ):
            with pytest.raises(InvalidRunInput):
                await engine.runner.start("shop", bad, principal="alice")
        assert await scalar(engine, "select count(*) from runs") == 1


AGENT_FILE = '''
from langchain.agents import create_agent
from langchain_core.tools import tool

from graphs import ApprovalMiddleware
from graphs.examples.scripted import ScriptedToolModel
from tests.integration.middleware_graphs import refund_script


@tool
async def issue_refund(order_id: str, amount: float) -> str:
    """Refund money on an order."""
    return f"refunded {amount:.2f} on {order_id}"


graph = create_agent(
    ScriptedToolModel(script=refund_script),
    tools=[issue_refund],
    middleware=[ApprovalMiddleware(interrupt_on={"issue_refund": True})],
)
'''


async def test_graphs_are_read_from_an_existing_langgraph_json(
    database_url: str, tmp_path: Path
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "shop_agent.py").write_text(AGENT_FILE)
    (tmp_path / "langgraph.json").write_text(
        json.dumps({"dependencies": ["."], "graphs": {"shop": "./src/shop_agent.py:graph"}})
    )
    config = tmp_path / "approvals.toml"
    config.write_text('langgraph_json = "langgraph.json"\n')
    settings = Settings(database_url=database_url, config_file=config)
    async with open_engine(database_url, settings) as engine:
        assert "shop" in engine.registry.names()
        out = await _start(engine, "refund 1001 25", graph="shop")
        await engine.decide_as_operator(out.pending[0], "approve", principal="bob")
        await engine.worker.drain()
        run = await engine.runs.get(out.run_id)
        assert run is not None
        assert run.answer == "success: refunded 25.00 on 1001"

    (tmp_path / "langgraph.json").write_text(json.dumps({"graphs": {"shop": "no-attr"}}))
    with pytest.raises(ConfigurationError, match="path:attr"):
        Settings(database_url=database_url, config_file=config).graph_entries()


async def test_a_tool_that_returns_a_command_runs_once_and_its_update_applies(
    database_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        database_url=database_url,
        config_file=tmp_path / "none.toml",
        graphs={"noted": "tests.integration.middleware_graphs:command_agent"},
    )
    async with open_engine(database_url, settings) as engine:
        out = await _start(engine, "refund 1001 25", graph="noted")
        await engine.decide_as_operator(out.pending[0], "approve", principal="bob")
        await engine.worker.drain()
        run = await engine.runs.get(out.run_id)
        assert run is not None
        assert run.status == "completed", run
        assert run.answer == "success: refunded 25.00 on 1001"
        assert len(await side_effects(engine, out.run_id, "refund-1001")) == 1
        [execution] = await engine.ledger.for_run(out.run_id)
        assert execution.status == "succeeded"
        assert execution.result == "refunded 25.00 on 1001"
        graph = engine.registry.get("noted")
        state = await graph.aget_state({"configurable": {"thread_id": out.thread_id}})
        assert state.values["note"] == "refund on 1001"


async def test_a_thread_whose_middleware_run_was_cancelled_takes_new_input(lc: Engine) -> None:
    out = await _start(lc, "refund 1001 25")
    with pytest.raises(ThreadBusy):
        await lc.runner.start(
            "lc_refund", {"message": "refund 1002 40"}, principal="alice", thread_id=out.thread_id
        )
    await lc.operations.cancel(out.run_id, principal="ops", reason="wrong order")
    follow_up = await lc.runner.start(
        "lc_refund", {"message": "refund 1002 40"}, principal="alice", thread_id=out.thread_id
    )
    assert follow_up.status == "waiting", follow_up
    graph = lc.registry.get("lc_refund")
    state = await graph.aget_state({"configurable": {"thread_id": out.thread_id}})
    results = {m.tool_call_id: m for m in state.values["messages"] if m.type == "tool"}
    assert json.loads(str(results["refund-1001"].content))["error"]["code"] == "cancelled"
    assert await side_effects(lc, out.run_id, "refund-1001") == []


async def test_a_thread_whose_input_review_was_cancelled_takes_new_input(hooked: Engine) -> None:
    out = await hooked.runner.start(
        "escalate_input", {"message": "refund 1005 25"}, principal="alice"
    )
    assert out.status == "waiting"
    await hooked.operations.cancel(out.run_id, principal="ops", reason="not today")
    follow_up = await hooked.runner.start(
        "escalate_input", {"message": "refund 1001 25"}, principal="alice", thread_id=out.thread_id
    )
    assert follow_up.status == "waiting", follow_up
    [request] = await _pending(hooked, follow_up.run_id)
    assert request.tool == "issue_refund"
    assert await side_effects(hooked, out.run_id, "refund-1005") == []


async def test_allowed_decisions_and_description_shape_the_request(
    database_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        database_url=database_url,
        config_file=tmp_path / "none.toml",
        graphs={"described": "tests.integration.middleware_graphs:described"},
    )
    async with open_engine(database_url, settings) as engine:
        out = await _start(engine, "refund 1001 25", graph="described")
        request = await engine.requests.get(out.pending[0])
        assert request is not None
        assert request.reason == "Check the amount first"
        assert not request.allow_edit
        with pytest.raises(InvalidDecision):
            await engine.decide_as_operator(
                out.pending[0], "approve", principal="bob", args={"order_id": "1001", "amount": 1}
            )
        assert await side_effects(engine, out.run_id, "refund-1001") == []


async def test_context_and_configurable_reach_the_tools_also_after_the_pause(
    database_url: str, tmp_path: Path
) -> None:
    """LangGraph checkpoints neither: the worker that resumes the run passes them again."""
    settings = Settings(
        database_url=database_url,
        config_file=tmp_path / "none.toml",
        graphs={
            "ctx": "tests.integration.middleware_graphs:context_agent",
            "lc_refund_plain": "tests.integration.middleware_graphs:build",
        },
    )
    async with open_engine(database_url, settings) as engine:
        given = {
            "message": "refund 1001 25",
            "context": {"customer_id": "c-9"},
            "configurable": {"region": "eu"},
        }
        out = await engine.runner.start("ctx", given, principal="alice")
        assert out.status == "waiting", out
        await engine.decide_as_operator(out.pending[0], "approve", principal="bob")
        await engine.worker.drain()
        run = await engine.runs.get(out.run_id)
        assert run is not None
        assert run.answer == "success: refunded 25.00 on 1001 for c-9 in eu", run
        [effect] = await side_effects(engine, out.run_id, "refund-1001")
        assert (effect["args"]["customer"], effect["args"]["region"]) == ("c-9", "eu")

        for bad in (
            {"message": "x", "configurable": {"approvals_principal": "mallory"}},
            {"message": "x", "configurable": {"thread_id": "other"}},
            {"message": "x", "context": "c-9"},
        ):
            with pytest.raises(InvalidRunInput):
                await engine.runner.start("ctx", bad, principal="alice")
        with pytest.raises(InvalidRunInput, match="no context_schema"):
            await engine.runner.start(
                "lc_refund_plain", {"message": "x", "context": {}}, principal="alice"
            )


async def test_governed_tools_keep_their_conditions_and_sensitivity_in_create_agent(
    database_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        database_url=database_url,
        config_file=tmp_path / "none.toml",
        graphs={"gov": "tests.integration.middleware_graphs:governed_tools_agent"},
    )
    async with open_engine(database_url, settings) as engine:
        # The precondition fails before anyone is asked.
        over = await engine.runner.start("gov", {"message": "refund 1001 500"}, principal="a")
        assert over.status == "completed", over
        assert over.answer is not None
        assert "precondition_failed" in over.answer
        assert "500.00 is more than 100" in over.answer
        assert await scalar(engine, "select count(*) from approval_requests") == 0
        # Marked sensitive, with no policy: a human decides, as under build_agent.
        out = await _start(engine, "refund 1001 25", graph="gov")
        await engine.decide_as_operator(out.pending[0], "approve", principal="bob")
        await engine.worker.drain()
        [effect] = await side_effects(engine, out.run_id, "refund-1001")
        assert effect["args"]["key"] == idempotency_key(run_id=out.run_id, call_id="refund-1001")
        run = await engine.runs.get(out.run_id)
        assert run is not None
        assert run.status == "completed", run


async def test_a_governed_tool_refuses_to_run_ungoverned() -> None:
    tool = middleware_graphs.refund_anything
    governed = from_langchain(tool, sensitive=True).as_tool()
    with pytest.raises(RuntimeError, match=r"runs only under graphs\.ApprovalMiddleware"):
        await governed.ainvoke({"order_id": "1001", "amount": 1.0})
