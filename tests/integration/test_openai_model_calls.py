"""OpenAI-SDK model calls through ``pre_model_call`` and ``post_model_call`` (``model_calls``):
on real PostgreSQL, with scripted models, started by the runner and resumed in a worker.

A policy at a model point decides what the model is asked and what the SDK acts on: a denied
request is never sent and nothing runs after it; a masked request is what the model sees; a
tool call dropped from the answer never runs and one rewritten runs as rewritten (and is what
the approver is shown); a nested agent's denied model call stops the whole run. A model named
by a string, and a streamed answer, are governed in process (no database).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agent_hooks import CompositionConfig, Decision, Transform, Verdict
from agent_hooks.composition import OnApproval
from agents import Agent, FunctionTool, RunConfig, function_tool
from agents import Runner as SDKRunner
from agents.items import TResponseStreamEvent
from agents.models.interface import Model, ModelProvider
from langgraph.checkpoint.memory import InMemorySaver
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseTextDeltaEvent,
)

from approvals.memory import MemoryApprovalRequests, MemoryStore, MemoryToolLedger
from graphs.examples.effects import side_effects as effects_of
from graphs.examples.openai_refund import ScriptedModel, refund_agent
from graphs.hooks.governance import Governance, Session
from graphs.hosts.openai import OpenAIAgent, current_call
from graphs.hosts.openai.calls import HostRun, enter, leave
from graphs.hosts.openai.governed import GovernedAgent
from graphs.hosts.openai.model_calls import (
    GovernedModel,
    GovernedProvider,
    ModelCallBlocked,
    governed_run_config,
)
from graphs.tool_call.deps import GraphDeps
from tests.integration.helpers import scalar
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")

HERE = "tests.integration.test_openai_model_calls"
CARD = "4111-1111-1111-1111"

#: What each scripted model was asked (its instructions and input), in order.
SEEN: list[dict[str, Any]] = []

Context = dict[str, Any]


class SeeingModel(ScriptedModel):
    """The scripted model, noting what it is asked in ``SEEN``."""

    async def get_response(self, system_instructions: Any, input: Any, *a: Any, **k: Any) -> Any:
        SEEN.append({"instructions": system_instructions, "input": json.dumps(input, default=str)})
        return await super().get_response(system_instructions, input, *a, **k)


class HelperModel(SeeingModel):
    """A nested agent's model (its own ``model.id`` for policies)."""


def _transform(value: Any, path: str = "$target") -> Verdict:
    return Verdict(decision=Decision.TRANSFORM, reason="policy", transform=Transform(path, value))


class NoClassified:
    """pre_model_call: a request that mentions "classified" is not sent."""

    def intercept(self, ctx: Context, /) -> Verdict:
        if ctx["interception_point"] == "pre_model_call" and "classified" in json.dumps(
            ctx["messages"]
        ):
            return Verdict.deny(reason="classified", message="classified matters stay here")
        return Verdict.allow()


class MaskCards:
    """pre_model_call: card numbers in user messages are masked before the model sees them."""

    def intercept(self, ctx: Context, /) -> Verdict:
        if ctx["interception_point"] != "pre_model_call":
            return Verdict.allow()
        messages = ctx["messages"]
        masked = [{**m, "content": str(m["content"]).replace(CARD, "[card]")} for m in messages]
        return _transform(masked) if masked != messages else Verdict.allow()


class Refunds:
    """post_model_call: refunds are dropped (``drop``), capped at 5.00, or denied."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def intercept(self, ctx: Context, /) -> Verdict:
        if ctx["interception_point"] != "post_model_call":
            return Verdict.allow()
        calls = ctx["response"]["tool_calls"]
        if not any(c["name"] == "issue_refund" for c in calls):
            return Verdict.allow()
        if self.mode == "deny":
            return Verdict.deny(reason="no_refunds", message="refunds go through a ticket")
        if self.mode == "drop":
            kept = [c for c in calls if c["name"] != "issue_refund"]
            answer = {"content": "Refunds go through a ticket.", "tool_calls": kept}
            return _transform({**ctx["response"], **answer})
        capped = [
            {**c, "args": {**c["args"], "amount": 5.0}} if c["name"] == "issue_refund" else c
            for c in calls
        ]
        return _transform(capped, "$target.tool_calls")


def _refunds(deps: GraphDeps, *interceptors: Any) -> OpenAIAgent:
    agent = refund_agent(deps)
    agent.model = SeeingModel()
    return OpenAIAgent(agent, governance=Governance(interceptors=list(interceptors)))


def classified(deps: GraphDeps) -> OpenAIAgent:
    return _refunds(deps, NoClassified())


def masked(deps: GraphDeps) -> OpenAIAgent:
    def echo(text: str, outputs: dict[str, Any]) -> tuple[list[Any], str]:
        return [], f"heard: {text}"

    agent = Agent(name="echo", instructions="Repeat what you hear.", model=SeeingModel(echo))
    return OpenAIAgent(agent, governance=Governance(interceptors=[MaskCards()]))


def refunds_dropped(deps: GraphDeps) -> OpenAIAgent:
    return _refunds(deps, Refunds("drop"))


def refunds_capped(deps: GraphDeps) -> OpenAIAgent:
    return _refunds(deps, Refunds("cap"))


def refunds_denied(deps: GraphDeps) -> OpenAIAgent:
    return _refunds(deps, Refunds("deny"))


class HelperDenied:
    """pre_model_call: the nested helper's model is never asked."""

    def intercept(self, ctx: Context, /) -> Verdict:
        if ctx["interception_point"] == "pre_model_call" and ctx["model"]["id"] == "HelperModel":
            return Verdict.deny(reason="helper", message="the helper may not be asked")
        return Verdict.allow()


def _send(deps: GraphDeps) -> FunctionTool:
    @function_tool
    async def send(to: str) -> str:
        """Send a message."""
        call = current_call()
        await effects_of(deps).record(
            run_id=call.run_id, call_id=call.call_id, tool="send", args={"to": to}
        )
        return f"sent to {to}"

    return send


def nested_denied(deps: GraphDeps) -> OpenAIAgent:
    def helper_script(text: str, outputs: dict[str, Any]) -> tuple[list[Any], str]:
        return ([("h1", "send", {"to": text})], "") if "h1" not in outputs else ([], "sent")

    def outer_script(text: str, outputs: dict[str, Any]) -> tuple[list[Any], str]:
        if "o1" not in outputs:
            return [("o1", "helper", {"input": "bob"})], ""
        return [], f"the helper said: {outputs['o1']}"

    helper = Agent(name="helper_agent", model=HelperModel(helper_script), tools=[_send(deps)])
    outer = Agent(
        name="outer",
        model=SeeingModel(outer_script),
        tools=[helper.as_tool("helper", "Sends a message.")],
    )
    return OpenAIAgent(outer, governance=Governance(interceptors=[HelperDenied()]))


def register(engine: Engine, name: str) -> str:
    engine.registry._entries[name] = f"{HERE}:{name}"
    SEEN.clear()
    return name


EFFECTS = "SELECT count(*) FROM demo_side_effects WHERE run_id = %s"
REQUESTS = "SELECT count(*) FROM approval_requests WHERE run_id = %s"
#: Trails (``trail``): a point its verdict allowed, as it is named.
START, END = ["agent_startup", "input"], ["output", "agent_shutdown"]
MODEL, TOOL = ["pre_model_call", "post_model_call"], ["pre_tool_call", "post_tool_call"]


async def trail(engine: Engine, run_id: str) -> list[str]:
    """The run's interception records: the point, and ``:decision`` when it did not allow."""
    rows = await engine.audit.interceptions(run_id)
    return [r["point"] + ("" if r["decision"] == "allow" else f":{r['decision']}") for r in rows]


async def effects(engine: Engine, run_id: str, requests: bool = False) -> int:
    """How many calls ran in the run (with ``requests``: how many requests it opened)."""
    found: int = await scalar(engine, REQUESTS if requests else EFFECTS, run_id)
    return found


def assert_stopped(run: Any, point: str, message: str) -> None:
    """The run ended, not completed, saying where and why a policy stopped it."""
    assert run.status in ("blocked", "failed"), run
    assert run.error is not None
    assert f"blocked at {point}: {message}" in run.error, run.error
    assert run.answer is None


async def test_a_denied_model_request_is_never_sent_and_nothing_runs(engine: Engine) -> None:
    name = register(engine, "classified")
    run = await engine.runner.start(name, {"message": "refund 1001, classified"}, principal="a")
    assert_stopped(run, "pre_model_call", "classified matters stay here")
    assert SEEN == []
    assert run.pending == []
    assert await effects(engine, run.run_id) == 0
    assert await trail(engine, run.run_id) == [*START, "pre_model_call:deny", "agent_shutdown"]


async def test_a_denied_model_call_settles_the_run_blocked(engine: Engine) -> None:
    name = register(engine, "classified")
    run = await engine.runner.start(name, {"message": "refund 1001, classified"}, principal="a")
    assert run.status == "blocked", run
    assert run.error == "blocked at pre_model_call: classified matters stay here"


async def test_a_masked_request_is_what_the_model_sees(engine: Engine) -> None:
    name = register(engine, "masked")
    run = await engine.runner.start(name, {"message": f"pay with {CARD} please"}, principal="a")
    assert run.status == "completed", run
    assert run.answer == "heard: pay with [card] please"
    [asked] = SEEN
    assert CARD not in asked["input"]
    assert "[card]" in asked["input"]
    # The messages the policy left as they were reach the model as they were.
    assert asked["instructions"] == "Repeat what you hear."
    assert await trail(engine, run.run_id) == [*START, "pre_model_call:transform", *MODEL[1:], *END]


async def test_a_tool_call_dropped_from_the_answer_never_runs(engine: Engine) -> None:
    name = register(engine, "refunds_dropped")
    run = await engine.runner.start(name, {"message": "refund 1001"}, principal="a")
    assert run.status == "completed", run
    assert run.answer == "Refunds go through a ticket."
    assert run.pending == []
    assert await effects(engine, run.run_id, requests=True) == 0
    assert await effects(engine, run.run_id) == 0
    assert (await trail(engine, run.run_id)).count("pre_tool_call") == 1  # lookup_order only


async def test_a_rewritten_tool_call_is_what_the_approver_sees_and_what_runs(
    engine: Engine,
) -> None:
    name = register(engine, "refunds_capped")
    run = await engine.runner.start(name, {"message": "refund 1001"}, principal="a")
    assert run.status == "waiting", run
    [request_id] = run.pending
    request = await engine.requests.get(request_id)
    assert request is not None
    assert request.shown["args"]["amount"] == 5.0
    await engine.decide_as_operator(request_id, "approve", principal="bob")
    await engine.drain()
    done = await engine.runs.get(run.run_id)
    assert done is not None
    assert done.status == "completed", done
    assert done.answer == "Refunded 5.00 on order 1001."
    [effect] = await engine.effects.for_call(run.run_id, "refund-1001")
    assert effect["args"]["amount"] == 5.0


async def test_a_denied_answer_reaches_nothing(engine: Engine) -> None:
    name = register(engine, "refunds_denied")
    run = await engine.runner.start(name, {"message": "refund 1001"}, principal="a")
    assert_stopped(run, "post_model_call", "refunds go through a ticket")
    assert run.pending == []
    assert await effects(engine, run.run_id) == 0
    # lookup_order ran; the answer proposing the refund was denied.
    denied = ["pre_model_call", "post_model_call:deny", "agent_shutdown"]
    assert await trail(engine, run.run_id) == [*START, *MODEL, *TOOL, *denied]


async def test_a_nested_agents_denied_model_call_stops_the_whole_run(engine: Engine) -> None:
    """The SDK turns the nested run's failure into the tool's error text for the outer agent;
    the outer model is not asked again, and the run stops."""
    name = register(engine, "nested_denied")
    run = await engine.runner.start(name, {"message": "go"}, principal="a")
    assert_stopped(run, "pre_model_call", "the helper may not be asked")
    assert len(SEEN) == 1  # the outer model's first turn only
    assert await effects(engine, run.run_id) == 0
    # The outer model called the helper, whose model call was denied.
    denied = ["pre_tool_call", "pre_model_call:deny", "agent_shutdown"]
    assert await trail(engine, run.run_id) == [*START, *MODEL, *denied]


def refund_model_points(deps: GraphDeps) -> OpenAIAgent:
    return _refunds(deps)


async def test_each_model_call_is_one_pair_of_records_across_the_pause(engine: Engine) -> None:
    """The SDK does not ask the model again for the turn it resumes: each model call has its
    pre_model_call and post_model_call once."""
    name = register(engine, "refund_model_points")
    run = await engine.runner.start(name, {"message": "refund 1001"}, principal="a")
    assert run.status == "waiting", run
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    await engine.drain()
    assert len(SEEN) == 3
    # lookup_order, then issue_refund (approved), then the answer.
    assert await trail(engine, run.run_id) == [*START, *MODEL, *TOOL, *MODEL, *TOOL, *MODEL, *END]


class Provider(ModelProvider):
    def __init__(self) -> None:
        self.asked: list[str | None] = []

    def get_model(self, model_name: str | None) -> Model:
        self.asked.append(model_name)
        return SeeingModel(lambda text, outputs: ([], f"named: {text}"))


def _memory_run(governance: Governance) -> HostRun:
    store = MemoryStore()
    requests, ledger = MemoryApprovalRequests(store), MemoryToolLedger(store)
    deps = GraphDeps(checkpointer=InMemorySaver(), requests=requests, ledger=ledger)
    session = Session(governance, graph="named", run_id="r", principal="a")
    return HostRun(
        run_id="r", thread_id="r", principal="a", agent_name="named", deps=deps, session=session
    )


async def test_a_model_named_by_a_string_is_governed_by_the_runs_provider() -> None:
    SEEN.clear()
    agent = Agent(name="named", model="house-model")
    host = GovernedAgent("named", OpenAIAgent(agent, governance=Governance(interceptors=[])))
    assert host.agent.model == "house-model"  # nothing to wrap at registration
    provider = Provider()
    config = governed_run_config(RunConfig(model_provider=provider, tracing_disabled=True))
    assert isinstance(config.model_provider, GovernedProvider)
    assert governed_run_config(config).model_provider is config.model_provider
    current = _memory_run(host.governance)
    token = enter(current)
    try:
        result = await SDKRunner.run(host.agent, "hello", run_config=config)
    finally:
        leave(token)
    assert result.final_output == "named: hello"
    assert provider.asked == ["house-model"]
    records = [r.to_wire() for r in current.session.records()]
    assert [r["interception_point"] for r in records] == ["pre_model_call", "post_model_call"]


async def test_a_governed_model_outside_an_engine_run_fails_closed() -> None:
    model = GovernedModel(ScriptedModel(lambda text, outputs: ([], "never")))
    agent = Agent(name="loose", model=model)
    with pytest.raises(RuntimeError, match="run it through the engine"):
        await SDKRunner.run(agent, "hello", run_config=RunConfig(tracing_disabled=True))


class StreamingModel(ScriptedModel):
    """Streams ``text`` in two deltas, then the completed response."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self._text = text

    def stream_response(self, *a: Any, **k: Any) -> AsyncIterator[TResponseStreamEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[TResponseStreamEvent]:
        half = len(self._text) // 2
        for part in (self._text[:half], self._text[half:]):
            yield ResponseTextDeltaEvent.model_construct(  # type: ignore[call-arg]
                type="response.output_text.delta", delta=part
            )
        text = ResponseOutputText(type="output_text", text=self._text, annotations=[])
        message = ResponseOutputMessage(
            type="message", id="msg-1", role="assistant", status="completed", content=[text]
        )
        response = Response.model_construct(  # type: ignore[call-arg]
            id="resp-1", output=[message], usage=None
        )
        yield ResponseCompletedEvent.model_construct(  # type: ignore[call-arg]
            type="response.completed", response=response
        )


class Redact:
    """post_model_call: the word "secret" never leaves the model call; "forbidden" is denied."""

    def intercept(self, ctx: Context, /) -> Verdict:
        if ctx["interception_point"] != "post_model_call":
            return Verdict.allow()
        content = ctx["response"]["content"] or ""
        if "forbidden" in content:
            return Verdict.deny(reason="forbidden", message="not said here")
        if "secret" in content:
            return _transform(content.replace("secret", "[redacted]"), "$target.content")
        return Verdict.allow()


async def _streamed(text: str) -> tuple[list[str], Any]:
    """The text deltas a streamed run's consumer saw, and its final output."""
    current = _memory_run(Governance(interceptors=[Redact()]))
    agent = Agent(name="streamer", model=GovernedModel(StreamingModel(text)))
    deltas: list[str] = []
    token = enter(current)
    try:
        result = SDKRunner.run_streamed(agent, "hi", run_config=RunConfig(tracing_disabled=True))
        async for event in result.stream_events():
            data = getattr(event, "data", None)
            if isinstance(data, ResponseTextDeltaEvent):
                deltas.append(data.delta)
    finally:
        leave(token)
    return deltas, result.final_output


async def test_a_streamed_answer_is_passed_on_once_post_model_call_allowed_it() -> None:
    deltas, final = await _streamed("all is well")
    assert "".join(deltas) == "all is well"
    assert final == "all is well"


async def test_a_streamed_answer_a_policy_rewrote_is_passed_on_rewritten_only() -> None:
    deltas, final = await _streamed("the secret plan")
    assert deltas == []
    assert final == "the [redacted] plan"


async def test_a_streamed_answer_a_policy_denied_is_passed_on_to_no_one() -> None:
    with pytest.raises(ModelCallBlocked, match="not said here"):
        await _streamed("a forbidden word")


class Gate:
    """pre_tool_call: every call is a liftable deny (an escalation) of this gate."""

    def __init__(self, name: str) -> None:
        self.name = name

    def intercept(self, ctx: Context, /) -> Verdict:
        if ctx["interception_point"] != "pre_tool_call":
            return Verdict.allow()
        return Verdict.escalate(reason=self.name, message=f"{self.name} asks a human")


def two_gates(deps: GraphDeps) -> OpenAIAgent:
    def script(text: str, outputs: dict[str, Any]) -> tuple[list[Any], str]:
        return ([("s1", "send", {"to": "x"})], "") if "s1" not in outputs else ([], "done")

    governance = Governance(
        interceptors=[Gate("gate-a"), Gate("gate-b")],
        composition=CompositionConfig.first_deny(OnApproval.RESUME),
    )
    agent = Agent(name="sender", model=SeeingModel(script), tools=[_send(deps)])
    return OpenAIAgent(agent, governance)


async def test_a_second_liftable_deny_of_an_approved_call_takes_its_one_decision(
    engine: Engine,
) -> None:
    """The SDK pauses a call once. A second gate that escalates the same call is met in the
    approved call's on_invoke_tool: the call's one request (keyed by its identity) answers it
    with its stored decision, and the call runs once."""
    name = register(engine, "two_gates")
    run = await engine.runner.start(name, {"message": "send"}, principal="a")
    assert run.status == "waiting", run
    [request_id] = run.pending
    await engine.decide_as_operator(request_id, "approve", principal="bob")
    await engine.drain()
    done = await engine.runs.get(run.run_id)
    assert done is not None
    assert done.status == "completed", done
    assert done.answer == "done"
    assert await effects(engine, run.run_id) == 1
    assert await effects(engine, run.run_id, requests=True) == 1
