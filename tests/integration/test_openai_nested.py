"""OpenAI-SDK runs whose approvals come from nested agents (``Agent.as_tool()``) that reuse call
ids, and tools whose own ``needs_approval`` cannot judge the arguments: on real PostgreSQL, with
scripted models, decided through the engine and resumed in a worker.

Regression tests for issue 33's bugs: a nested call keyed by its call id alone was never shown
to an approver (bug 1); a failure while applying a decision stranded the run in ``waiting``
(bug 2); a ``needs_approval`` predicate called before the schema check failed the run (bug 3).
"""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, function_tool

from graphs.examples.effects import side_effects as effects_of
from graphs.examples.openai_refund import ScriptedModel
from graphs.hosts.openai import current_call
from graphs.tool_call.deps import GraphDeps
from tests.integration.helpers import scalar
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")

HERE = "tests.integration.test_openai_nested"


def send_tool(deps: GraphDeps) -> Any:
    """``send(to)``: needs approval; each run of it is recorded as a side effect."""

    @function_tool(needs_approval=True)
    async def send(to: str) -> str:
        """Send the message. Needs approval."""
        call = current_call()
        await effects_of(deps).record(
            run_id=call.run_id, call_id=call.call_id, tool="send", args={"to": to}
        )
        return f"sent to {to}"

    return send


def sender(deps: GraphDeps, to: str) -> Agent[Any]:
    """A nested agent whose model always names its one call ``n1``, whatever run it is in."""

    def script(text: str, outputs: dict[str, Any]) -> tuple[list[Any], str]:
        if "n1" not in outputs:
            return [("n1", "send", {"to": text})], ""
        return [], f"done: {outputs['n1']}"

    return Agent(name="sender", model=ScriptedModel(script), tools=[send_tool(deps)])


def outer(deps: GraphDeps, recipients: tuple[str, str]) -> Agent[Any]:
    """The outer agent calls the same ``as_tool`` agent twice in one turn."""
    nested = sender(deps, "?").as_tool("messenger", "Sends one message.")

    def script(text: str, outputs: dict[str, Any]) -> tuple[list[Any], str]:
        if "o1" not in outputs or "o2" not in outputs:
            return [
                ("o1", "messenger", {"input": recipients[0]}),
                ("o2", "messenger", {"input": recipients[1]}),
            ], ""
        return [], f"{outputs['o1']} | {outputs['o2']}"

    return Agent(name="outer", model=ScriptedModel(script), tools=[nested])


def two_recipients(deps: GraphDeps) -> Agent[Any]:
    return outer(deps, ("x", "y"))


def one_recipient_twice(deps: GraphDeps) -> Agent[Any]:
    return outer(deps, ("x", "x"))


async def sends(engine: Engine, run_id: str) -> list[Any]:
    async with engine.connection() as conn:
        rows = await (
            await conn.execute(
                "SELECT call_id, args FROM demo_side_effects WHERE run_id = %s ORDER BY call_id",
                (run_id,),
            )
        ).fetchall()
    return [(row["call_id"], row["args"]["to"]) for row in rows]


async def test_two_nested_runs_reusing_a_call_id_each_get_a_request_and_run_once(
    engine: Engine,
) -> None:
    engine.registry._entries["nested_two"] = f"{HERE}:two_recipients"
    run = await engine.runner.start("nested_two", {"message": "go"}, principal="alice")
    assert run.status == "waiting", run
    # One request per nested call, each where it comes from; none superseded.
    assert len(run.pending) == 2, run
    shown = {}
    for request_id in run.pending:
        request = await engine.requests.get(request_id)
        assert request is not None
        assert request.status == "pending"
        shown[request.call_id] = request.shown["args"]
    assert shown == {"o1/n1": {"to": "x"}, "o2/n1": {"to": "y"}}
    superseded = await scalar(
        engine,
        "SELECT count(*) FROM approval_requests WHERE run_id = %s AND status = 'superseded'",
        run.run_id,
    )
    assert superseded == 0
    assert await sends(engine, run.run_id) == []

    for request_id in run.pending:
        await engine.decide_as_operator(request_id, "approve", principal="bob")
    await engine.drain()
    finished = await engine.runs.get(run.run_id)
    assert finished is not None
    assert finished.status == "completed", finished
    assert await sends(engine, run.run_id) == [("o1/n1", "x"), ("o2/n1", "y")]
    assert finished.answer is not None
    assert "sent to x" in finished.answer
    assert "sent to y" in finished.answer


async def test_one_nested_call_approved_and_the_other_rejected(engine: Engine) -> None:
    engine.registry._entries["nested_mixed"] = f"{HERE}:two_recipients"
    run = await engine.runner.start("nested_mixed", {"message": "go"}, principal="alice")
    by_call = {}
    for request_id in run.pending:
        request = await engine.requests.get(request_id)
        assert request is not None
        by_call[request.call_id] = request_id
    await engine.decide_as_operator(by_call["o2/n1"], "reject", principal="bob", reason="no")
    await engine.decide_as_operator(by_call["o1/n1"], "approve", principal="bob")
    await engine.drain()
    finished = await engine.runs.get(run.run_id)
    assert finished is not None
    assert finished.status == "completed", finished
    assert await sends(engine, run.run_id) == [("o1/n1", "x")]


async def test_a_decision_the_sdk_cannot_apply_fails_the_run_visibly(engine: Engine) -> None:
    """Two nested runs with the same call id and the same arguments: the SDK itself cannot
    tell their approvals apart (``UserError``). The run fails, saying why; it never stays
    ``waiting`` with nothing to decide, and nothing ran."""
    engine.registry._entries["nested_same"] = f"{HERE}:one_recipient_twice"
    run = await engine.runner.start("nested_same", {"message": "go"}, principal="alice")
    assert run.status == "waiting", run
    assert len(run.pending) == 2
    for request_id in run.pending:
        await engine.decide_as_operator(request_id, "approve", principal="bob")
    await engine.drain()
    finished = await engine.runs.get(run.run_id)
    assert finished is not None
    assert finished.status == "failed", finished
    assert finished.error is not None
    assert "could not be applied" in finished.error
    assert await sends(engine, run.run_id) == []
    jobs = await scalar(
        engine,
        "SELECT count(*) FROM resume_queue WHERE run_id = %s AND status = 'queued'",
        run.run_id,
    )
    assert jobs == 0


# -- needs_approval predicates and ill-typed arguments ------------------------------------------


def payer(deps: GraphDeps, needs: Any, amount: Any) -> Agent[Any]:
    """An agent that calls ``pay(amount=amount)`` once; ``needs``: the tool's own
    ``needs_approval``."""

    @function_tool(needs_approval=needs)
    async def pay(amount: float) -> str:
        """Pay an amount."""
        call = current_call()
        await effects_of(deps).record(
            run_id=call.run_id, call_id=call.call_id, tool="pay", args={"to": str(amount)}
        )
        return f"paid {amount}"

    def script(text: str, outputs: dict[str, Any]) -> tuple[list[Any], str]:
        if "p1" not in outputs:
            return [("p1", "pay", {"amount": amount})], ""
        return [], f"tool said: {outputs['p1']}"

    return Agent(name="payer", model=ScriptedModel(script), tools=[pay])


def picky_payer(deps: GraphDeps) -> Agent[Any]:
    async def over_100(ctx: Any, params: dict[str, Any], call_id: str) -> bool:
        return bool(params["amount"] > 100)  # TypeError for "lots"

    return payer(deps, over_100, "lots")


def broken_predicate(deps: GraphDeps) -> Agent[Any]:
    async def needs(ctx: Any, params: dict[str, Any], call_id: str) -> bool:
        return bool(params["missing"])  # KeyError for every call

    return payer(deps, needs, 5)


async def test_ill_typed_arguments_answer_the_model_before_the_tools_own_predicate(
    engine: Engine,
) -> None:
    engine.registry._entries["picky"] = f"{HERE}:picky_payer"
    run = await engine.runner.start("picky", {"message": "pay"}, principal="alice")
    assert run.status == "completed", run
    assert run.answer is not None
    assert "invalid_arguments" in run.answer
    assert await sends(engine, run.run_id) == []


async def test_a_predicate_that_fails_answers_the_model_invalid_arguments(
    engine: Engine,
) -> None:
    engine.registry._entries["broken"] = f"{HERE}:broken_predicate"
    run = await engine.runner.start("broken", {"message": "pay"}, principal="alice")
    assert run.status == "completed", run
    assert run.answer is not None
    assert "invalid_arguments" in run.answer
    assert "KeyError" in run.answer
    assert await sends(engine, run.run_id) == []


def slashed(deps: GraphDeps) -> Agent[Any]:
    """A top-level call whose model-made id looks like a nested call's place."""
    return outer_with_id(deps, "o1/n1")


def outer_with_id(deps: GraphDeps, call_id: str) -> Agent[Any]:
    nested = sender(deps, "?").as_tool("messenger", "Sends one message.")

    def script(text: str, outputs: dict[str, Any]) -> tuple[list[Any], str]:
        if "o1" not in outputs:
            return [("o1", "messenger", {"input": "x"}), (call_id, "send", {"to": "y"})], ""
        return [], f"{outputs['o1']} | {outputs.get(call_id)}"

    return Agent(name="outer", model=ScriptedModel(script), tools=[nested, send_tool(deps)])


async def test_a_model_made_call_id_cannot_name_a_nested_calls_place(engine: Engine) -> None:
    """The top-level model names its own call ``o1/n1``, the place of the nested call ``n1``
    inside ``o1``: the two stay apart (the slash is escaped), each with its request, and each
    runs once."""
    engine.registry._entries["slashed"] = f"{HERE}:slashed"
    run = await engine.runner.start("slashed", {"message": "go"}, principal="alice")
    assert run.status == "waiting", run
    calls = set()
    for request_id in run.pending:
        request = await engine.requests.get(request_id)
        assert request is not None
        calls.add(request.call_id)
        await engine.decide_as_operator(request_id, "approve", principal="bob")
    assert calls == {"o1/n1", "o1%2Fn1"}
    await engine.drain()
    finished = await engine.runs.get(run.run_id)
    assert finished is not None
    assert finished.status == "completed", finished
    assert await sends(engine, run.run_id) == [("o1%2Fn1", "y"), ("o1/n1", "x")]
