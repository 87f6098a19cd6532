"""HumanInTheLoopMiddleware's decision outcomes, through the engine (issue 31's acceptance): an
``ApprovalMiddleware`` agent is started by the engine's runner, an approver decides each paused
call over the HTTP API of a served app (``POST /api/v1/pending/{id}/decision``, with a
person's token) and a worker resumes the thread. What HITL's own tests check when the
application resumes the graph in process must hold here too: the message the model gets for
an approve, an edit (with the edit notice), a reject and a respond, with HITL's
``additional_kwargs``; every call of a turn decided on its own, results in the model's call
order; each tool run once at most; the pause shaped as HITL shapes it, with the engine's keys.

The decisions are written in HITL's vocabulary (``{"type": "edit", "edited_action": ...}``)
and sent as the API's body (an edit is an approve with arguments). A behaviour the engine does
not give yet is written as it should be and marked ``xfail(strict=True)`` with the reason.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain.agents.middleware.human_in_the_loop import _EDIT_NOTICE
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Interrupt

from approvals.model import RequestStatus, RunStatus
from graphs.run.outcome import RunOutcome
from tests.integration.helpers import person_token, served_api
from tests.integration.hitl_engine_graphs import OWN_NOTICE, PREFIX, calls_input
from web.engine import Engine, open_engine
from web.settings import Settings

GRAPHS = {
    "batched": "tests.integration.hitl_engine_graphs:batched",
    "per_call": "tests.integration.hitl_engine_graphs:per_call",
    "per_call_cc": "tests.integration.hitl_engine_graphs:per_call_cc",
    "own_notice": "tests.integration.hitl_engine_graphs:own_notice",
    "no_notice": "tests.integration.hitl_engine_graphs:no_notice",
}
#: HITL's marker on the messages its decisions write in the tool's place.
HITL_SOURCE = "hitl_interrupt_decision"
#: The engine's keys beside HITL's, in either shape of pause.
ENGINE_KEYS = {
    "request_id",
    "call_id",
    "tool",
    "identity",
    "expires_at",
    "shown_digest",
    "allowed_decisions",
}
EMAIL = ("call_email", "send_email", {"to": "alice"})
TO_BOB = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "bob"}}}


@dataclass
class Through:
    """The engine of a test, and an API client (an approver's token) of the app serving it."""

    engine: Engine
    api: httpx.AsyncClient

    async def start(self, graph: str, *calls: tuple[str, str, dict[str, Any]]) -> RunOutcome:
        out = await self.engine.runner.start(graph, calls_input(*calls), principal="alice")
        assert out.status == "waiting", out
        return out

    async def waiting(self, run_id: str) -> dict[str, str]:
        """The run's pending requests, by call id."""
        return {
            r.call_id: r.id
            for r in await self.engine.requests.for_run(run_id)
            if r.status is RequestStatus.PENDING
        }

    async def decide(self, request_id: str, decision: dict[str, Any]) -> httpx.Response:
        """``decision`` (HITL's) as an approver sends it over the API."""
        return await self.api.post(f"/api/v1/pending/{request_id}/decision", json=_body(decision))

    async def decide_and_resume(self, request_id: str, decision: dict[str, Any]) -> None:
        decided = await self.decide(request_id, decision)
        assert decided.status_code == 200, decided.text
        assert await self.engine.worker.drain() == 1

    async def seen(self, run_id: str) -> list[dict[str, Any]]:
        """The tool results the model got, in the order it got them (its final answer)."""
        run = await self.engine.runs.get(run_id)
        assert run is not None
        assert run.status is RunStatus.COMPLETED, run
        assert run.answer is not None
        results = json.loads(run.answer)
        assert isinstance(results, list)
        return results

    async def ran(self, run_id: str, call_id: str) -> list[dict[str, Any]]:
        """The arguments of each real invocation of call ``call_id``."""
        return [e["args"] for e in await self.engine.effects.for_call(run_id, call_id)]

    async def messages(self, graph: str, thread_id: str) -> list[Any]:
        state = await self.engine.registry.get(graph).aget_state(
            {"configurable": {"thread_id": thread_id}}
        )
        messages = state.values["messages"]
        assert isinstance(messages, list)
        return messages

    async def interrupts(self, graph: str, thread_id: str) -> list[Interrupt]:
        """The interrupts the thread waits on, as a HITL client reads them from its state."""
        state = await self.engine.registry.get(graph).aget_state(
            {"configurable": {"thread_id": thread_id}}
        )
        return [i for task in state.tasks for i in task.interrupts]


def _body(decision: dict[str, Any]) -> dict[str, Any]:
    kind = decision["type"]
    if kind == "approve":
        return {"decision": "approve"}
    if kind == "edit":
        return {"decision": "approve", "args": decision["edited_action"]["args"]}
    if kind == "reject":
        message = decision.get("message")
        return {"decision": "reject", **({"reason": message} if message else {})}
    assert kind == "respond", decision
    return {"decision": "respond", "message": decision["message"]}


@pytest.fixture
async def through(database_url: str, tmp_path: Path) -> AsyncIterator[Through]:
    """The engine, and the app served over TCP on it (no worker of its own: the test drains
    the engine's, so it knows each resume happened, and when)."""
    settings = Settings(
        database_url=database_url,
        data_dir=tmp_path,
        config_file=tmp_path / "none.toml",
        secret_key="test-secret-key-" + "x" * 32,
        graphs=GRAPHS,
    )
    async with open_engine(database_url, settings) as engine:
        secret = await person_token(engine, "bob", "approvers")
        async with served_api(engine, settings, secret) as api:
            yield Through(engine, api)


def rejected(tool: str, reason: str) -> str:
    return f"User rejected the tool call for `{tool}` with reason: {reason}"


def notice(tool: str, args: dict[str, Any], result: str, wording: str = _EDIT_NOTICE) -> str:
    """HITL's edit notice for a call a reviewer replaced with ``tool(args)``, then its result."""
    return (
        f"{wording} Executed instead: {tool} with arguments {json.dumps(args)}."
        f"\n\nTool response:\n{result}"
    )


def decided_by_hitl(kind: str) -> dict[str, Any]:
    """The ``additional_kwargs`` HITL sets on a message it writes in the tool's place."""
    return {"lc_source": HITL_SOURCE, "lc_data": {"decision": kind}}


def assert_paired(messages: list[Any]) -> None:
    """Every tool result answers a call of the model turn just before it (what providers
    require), each once."""
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, AIMessage):
            open_calls = {str(tc["id"]) for tc in message.tool_calls}
        elif isinstance(message, ToolMessage):
            assert message.tool_call_id in open_calls, message
            open_calls.discard(message.tool_call_id)


# -- one call, each decision (HITL's test_resume_with_each_decision, both modes) ---------

EACH_DECISION = [
    pytest.param({"type": "approve"}, [{"to": "alice"}], "success", "sent to alice", id="approve"),
    pytest.param(
        TO_BOB,
        [{"to": "bob"}],
        "success",
        notice("send_email", {"to": "bob"}, "sent to bob"),
        id="edit",
    ),
    pytest.param(
        {"type": "reject", "message": "not now"},
        [],
        "error",
        rejected("send_email", "not now"),
        id="reject",
    ),
    pytest.param(
        {"type": "respond", "message": "already sent"}, [], "success", "already sent", id="respond"
    ),
]


@pytest.mark.parametrize(("decision", "ran_with", "status", "content"), EACH_DECISION)
@pytest.mark.parametrize("graph", ["batched", "per_call"])
async def test_each_decision_reaches_the_model_as_hitl_words_it(
    through: Through,
    graph: str,
    decision: dict[str, Any],
    ran_with: list[dict[str, Any]],
    status: str,
    content: str,
) -> None:
    out = await through.start(graph, EMAIL)
    [request_id] = out.pending
    await through.decide_and_resume(request_id, decision)

    [message] = await through.seen(out.run_id)
    assert (message["id"], message["name"]) == ("call_email", "send_email")
    assert (message["status"], message["content"]) == (status, content)
    # HITL marks only the messages it writes in the tool's place; a result the tool gave
    # (approved or edited) carries none.
    kind = decision["type"]
    assert message["additional_kwargs"] == (
        decided_by_hitl(kind) if kind in ("reject", "respond") else {}
    )
    assert ("Executed instead: send_email" in message["content"]) == (kind == "edit")
    assert await through.ran(out.run_id, "call_email") == ran_with


async def test_an_edit_with_an_argument_the_tool_does_not_declare_runs_without_it(
    through: Through,
) -> None:
    out = await through.start("per_call", EMAIL)
    edit = {
        "type": "edit",
        "edited_action": {"name": "send_email", "args": {"to": "bob", "subject": "hi"}},
    }
    await through.decide_and_resume(out.pending[0], edit)
    [message] = await through.seen(out.run_id)
    assert (message["status"], message["content"].endswith("sent to bob")) == ("success", True)
    assert "Executed instead: send_email" in message["content"]
    assert await through.ran(out.run_id, "call_email") == [{"to": "bob"}]


# -- approve ------------------------------------------------------------------------------


async def test_an_approved_call_runs_once_and_its_result_is_the_tools_own(
    through: Through,
) -> None:
    out = await through.start("batched", ("call_1", "get_forecast", {"location": "SF"}))
    assert await through.ran(out.run_id, "call_1") == []
    await through.decide_and_resume(out.pending[0], {"type": "approve"})

    [message] = await through.seen(out.run_id)
    assert message == {
        "id": "call_1",
        "name": "get_forecast",
        "status": "success",
        "content": "forecast for SF: sunny",
        "additional_kwargs": {},
    }
    assert await through.ran(out.run_id, "call_1") == [{"location": "SF"}]
    messages = await through.messages("batched", out.thread_id)
    [turn] = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls]
    assert turn.tool_calls[0]["args"] == {"location": "SF"}
    assert_paired(messages)


# -- edit ---------------------------------------------------------------------------------


async def test_an_edit_runs_the_reviewers_arguments_and_the_model_keeps_its_own_call(
    through: Through,
) -> None:
    out = await through.start("batched", EMAIL)
    await through.decide_and_resume(out.pending[0], TO_BOB)

    assert await through.ran(out.run_id, "call_email") == [{"to": "bob"}]
    [message] = await through.seen(out.run_id)
    assert message["content"] == notice("send_email", {"to": "bob"}, "sent to bob")
    # The model's own (replaced) arguments are not echoed back to it.
    assert "alice" not in message["content"]
    messages = await through.messages("batched", out.thread_id)
    [turn] = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls]
    assert turn.tool_calls == [
        {"name": "send_email", "args": {"to": "alice"}, "id": "call_email", "type": "tool_call"}
    ]
    assert_paired(messages)


async def test_an_edit_notice_in_the_agents_own_words(through: Through) -> None:
    out = await through.start("own_notice", EMAIL)
    await through.decide_and_resume(out.pending[0], TO_BOB)
    [message] = await through.seen(out.run_id)
    assert message["content"] == notice("send_email", {"to": "bob"}, "sent to bob", OWN_NOTICE)
    assert _EDIT_NOTICE not in message["content"]


async def test_no_edit_notice_leaves_an_edited_calls_result_as_the_tool_gave_it(
    through: Through,
) -> None:
    out = await through.start("no_notice", EMAIL)
    await through.decide_and_resume(out.pending[0], TO_BOB)
    [message] = await through.seen(out.run_id)
    assert (message["status"], message["content"]) == ("success", "sent to bob")
    assert await through.ran(out.run_id, "call_email") == [{"to": "bob"}]


# -- reject -------------------------------------------------------------------------------


async def test_a_rejected_call_never_runs_and_its_answer_stays_paired(through: Through) -> None:
    out = await through.start("batched", ("call_1", "get_forecast", {"location": "SF"}))
    await through.decide_and_resume(
        out.pending[0], {"type": "reject", "message": "Custom response message"}
    )

    [message] = await through.seen(out.run_id)
    assert message == {
        "id": "call_1",
        "name": "get_forecast",
        "status": "error",
        "content": rejected("get_forecast", "Custom response message"),
        "additional_kwargs": decided_by_hitl("reject"),
    }
    assert await through.ran(out.run_id, "call_1") == []
    assert await through.engine.ledger.for_run(out.run_id) == []
    assert_paired(await through.messages("batched", out.thread_id))


async def test_a_reject_without_a_reason_gives_the_model_hitls_default_text(
    through: Through,
) -> None:
    out = await through.start("batched", ("call_1", "get_forecast", {"location": "SF"}))
    await through.decide_and_resume(out.pending[0], {"type": "reject"})
    [message] = await through.seen(out.run_id)
    assert message == {
        "id": "call_1",
        "name": "get_forecast",
        "status": "error",
        "content": (
            "User rejected the tool call for `get_forecast` with id call_1. The tool was not "
            "executed. Do not retry this tool call unless the user explicitly requests it."
        ),
        "additional_kwargs": decided_by_hitl("reject"),
    }
    assert await through.ran(out.run_id, "call_1") == []


# -- respond ------------------------------------------------------------------------------


async def test_respond_answers_in_the_tools_place_as_its_success(through: Through) -> None:
    out = await through.start("batched", ("call_1", "ask_user", {"question": "favorite color?"}))
    [intr] = await through.interrupts("batched", out.thread_id)
    assert intr.value["review_configs"] == [
        {"action_name": "ask_user", "allowed_decisions": ["respond"]}
    ]
    await through.decide_and_resume(out.pending[0], {"type": "respond", "message": "blue"})

    [message] = await through.seen(out.run_id)
    assert message == {
        "id": "call_1",
        "name": "ask_user",
        "status": "success",
        "content": "blue",
        "additional_kwargs": decided_by_hitl("respond"),
    }
    assert await through.ran(out.run_id, "call_1") == []
    assert_paired(await through.messages("batched", out.thread_id))


# -- several calls in one turn ------------------------------------------------------------


async def test_approve_and_respond_in_one_turn(through: Through) -> None:
    out = await through.start(
        "batched",
        ("1", "get_forecast", {"location": "SF"}),
        ("2", "ask_user", {"question": "favorite color?"}),
    )
    waiting = await through.waiting(out.run_id)
    assert set(waiting) == {"1", "2"}
    await through.decide_and_resume(waiting["1"], {"type": "approve"})
    await through.decide_and_resume(waiting["2"], {"type": "respond", "message": "blue"})

    forecast, answer = await through.seen(out.run_id)
    assert (forecast["id"], forecast["status"]) == ("1", "success")
    assert forecast["content"] == "forecast for SF: sunny"
    assert forecast["additional_kwargs"] == {}
    assert (answer["id"], answer["name"], answer["status"]) == ("2", "ask_user", "success")
    assert answer["content"] == "blue"
    assert answer["additional_kwargs"] == decided_by_hitl("respond")
    assert await through.ran(out.run_id, "1") == [{"location": "SF"}]
    assert await through.ran(out.run_id, "2") == []


async def test_approve_and_reject_in_one_turn(through: Through) -> None:
    out = await through.start(
        "batched",
        ("1", "get_forecast", {"location": "San Francisco"}),
        ("2", "get_temperature", {"location": "San Francisco"}),
    )
    waiting = await through.waiting(out.run_id)
    # The rejection decided first: the other call still waits, and nothing ran.
    await through.decide_and_resume(
        waiting["2"], {"type": "reject", "message": "User rejected this tool call"}
    )
    assert await through.waiting(out.run_id) == {"1": waiting["1"]}
    assert await through.ran(out.run_id, "2") == []
    await through.decide_and_resume(waiting["1"], {"type": "approve"})

    forecast, temperature = await through.seen(out.run_id)
    assert (forecast["id"], forecast["status"]) == ("1", "success")
    assert forecast["content"] == "forecast for San Francisco: sunny"
    assert (temperature["id"], temperature["name"]) == ("2", "get_temperature")
    assert temperature["status"] == "error"
    assert temperature["content"] == rejected("get_temperature", "User rejected this tool call")
    assert temperature["additional_kwargs"] == decided_by_hitl("reject")
    assert await through.ran(out.run_id, "1") == [{"location": "San Francisco"}]
    assert await through.ran(out.run_id, "2") == []
    messages = await through.messages("batched", out.thread_id)
    # Both calls stay on the model's turn: the rejected one is answered, not removed.
    [turn] = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls]
    assert [tc["name"] for tc in turn.tool_calls] == ["get_forecast", "get_temperature"]
    assert_paired(messages)


async def test_edits_of_two_calls_in_one_turn_each_run_their_own_arguments(
    through: Through,
) -> None:
    out = await through.start(
        "batched",
        ("1", "get_forecast", {"location": "San Francisco"}),
        ("2", "get_temperature", {"location": "San Francisco"}),
    )
    waiting = await through.waiting(out.run_id)
    for call_id, tool in (("1", "get_forecast"), ("2", "get_temperature")):
        edit = {"type": "edit", "edited_action": {"name": tool, "args": {"location": "New York"}}}
        await through.decide_and_resume(waiting[call_id], edit)

    forecast, temperature = await through.seen(out.run_id)
    new_york = {"location": "New York"}
    assert forecast["content"] == notice("get_forecast", new_york, "forecast for New York: sunny")
    assert temperature["content"] == notice(
        "get_temperature", new_york, "temperature in New York: 21C"
    )
    assert [forecast["status"], temperature["status"]] == ["success", "success"]
    assert await through.ran(out.run_id, "1") == [new_york]
    assert await through.ran(out.run_id, "2") == [new_york]
    messages = await through.messages("batched", out.thread_id)
    [turn] = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls]
    # The model's calls keep their ids and its own arguments.
    assert [(tc["id"], tc["args"]) for tc in turn.tool_calls] == [
        ("1", {"location": "San Francisco"}),
        ("2", {"location": "San Francisco"}),
    ]
    assert_paired(messages)


# -- the model's call order, with calls that run unasked ----------------------------------

FIVE = [(f"id_{x}", f"tool_{x}", {"val": n}) for n, x in enumerate("abcde", start=1)]


async def _five_calls_b_and_d_waiting(through: Through) -> tuple[RunOutcome, dict[str, str]]:
    out = await through.start("batched", *FIVE)
    waiting = await through.waiting(out.run_id)
    # Only the gated calls wait; the others ran, once, before anyone decided.
    assert set(waiting) == {"id_b", "id_d"}
    for call_id, _, args in FIVE:
        expected = [] if call_id in waiting else [args]
        assert await through.ran(out.run_id, call_id) == expected
    return out, waiting


async def _five_results_in_order(through: Through, out: RunOutcome) -> list[dict[str, Any]]:
    results = await through.seen(out.run_id)
    assert [r["id"] for r in results] == [call_id for call_id, _, _ in FIVE]
    for call_id, _, _ in FIVE:
        assert len(await through.ran(out.run_id, call_id)) <= 1
    messages = await through.messages("batched", out.thread_id)
    [turn] = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls]
    assert [(tc["id"], tc["name"], tc["args"]) for tc in turn.tool_calls] == FIVE
    assert_paired(messages)
    return results


async def test_results_keep_the_models_call_order(through: Through) -> None:
    out, waiting = await _five_calls_b_and_d_waiting(through)
    await through.decide_and_resume(waiting["id_d"], {"type": "approve"})
    await through.decide_and_resume(waiting["id_b"], {"type": "approve"})

    results = await _five_results_in_order(through, out)
    assert [r["content"] for r in results] == [
        f"tool_{x} ran with {n}" for n, x in enumerate("abcde", start=1)
    ]
    assert {r["status"] for r in results} == {"success"}


async def test_results_keep_the_models_call_order_with_an_edit(through: Through) -> None:
    out, waiting = await _five_calls_b_and_d_waiting(through)
    edit = {"type": "edit", "edited_action": {"name": "tool_b", "args": {"val": 200}}}
    await through.decide_and_resume(waiting["id_b"], edit)
    await through.decide_and_resume(waiting["id_d"], {"type": "approve"})

    results = await _five_results_in_order(through, out)
    assert results[1]["content"] == notice("tool_b", {"val": 200}, "tool_b ran with 200")
    assert [r["content"] for r in results[2:]] == [
        "tool_c ran with 3",
        "tool_d ran with 4",
        "tool_e ran with 5",
    ]
    assert await through.ran(out.run_id, "id_b") == [{"val": 200}]


async def test_results_keep_the_models_call_order_with_a_rejection(through: Through) -> None:
    out, waiting = await _five_calls_b_and_d_waiting(through)
    await through.decide_and_resume(
        waiting["id_b"], {"type": "reject", "message": "Rejected tool B"}
    )
    await through.decide_and_resume(waiting["id_d"], {"type": "approve"})

    results = await _five_results_in_order(through, out)
    assert results[1]["content"] == rejected("tool_b", "Rejected tool B")
    assert (results[1]["status"], results[1]["additional_kwargs"]) == (
        "error",
        decided_by_hitl("reject"),
    )
    assert [r["status"] for r in results] == ["success", "error", "success", "success", "success"]
    assert await through.ran(out.run_id, "id_b") == []
    assert await through.ran(out.run_id, "id_d") == [{"val": 4}]


# -- the pause, as a HITL client reads it -------------------------------------------------


async def test_a_batched_pause_is_a_hitl_request_with_the_engines_keys(through: Through) -> None:
    out = await through.start("batched", ("1", "get_forecast", {"location": "SF"}))
    [intr] = await through.interrupts("batched", out.thread_id)
    value = intr.value
    assert set(value) == {"action_requests", "review_configs"} | ENGINE_KEYS
    [action] = value["action_requests"]
    assert set(action) == {"name", "args", "description"}
    assert (action["name"], action["args"]) == ("get_forecast", {"location": "SF"})
    assert PREFIX in action["description"]
    assert value["review_configs"] == [
        {"action_name": "get_forecast", "allowed_decisions": ["approve", "edit", "reject"]}
    ]
    assert value["request_id"] == out.pending[0]
    assert (value["call_id"], value["tool"]) == ("1", "get_forecast")
    assert value["allowed_decisions"] == ["approve", "edit", "reject"]
    # What the API shows an approver is the request the pause names.
    shown = await through.api.get(f"/api/v1/pending/{value['request_id']}")
    assert shown.status_code == 200, shown.text
    assert shown.json()["allowed_decisions"] == ["approve", "edit", "reject"]


async def test_each_gated_call_of_a_turn_pauses_with_its_own_request(through: Through) -> None:
    """The engine decides each call on its own: in batched mode a turn of two gated calls
    is two pauses, each a ``HITLRequest`` of its one action, naming its own request."""
    out = await through.start(
        "batched",
        ("1", "get_forecast", {"location": "SF"}),
        ("2", "get_temperature", {"location": "SF"}),
    )
    paused = await through.interrupts("batched", out.thread_id)
    by_call = {i.value["call_id"]: i.value for i in paused}
    assert set(by_call) == {"1", "2"}
    assert {v["request_id"] for v in by_call.values()} == set(out.pending)
    for call_id, tool in (("1", "get_forecast"), ("2", "get_temperature")):
        [action] = by_call[call_id]["action_requests"]
        assert action["name"] == tool
        assert by_call[call_id]["review_configs"][0]["action_name"] == tool


@pytest.mark.xfail(
    strict=True,
    reason=(
        "Under the engine an action's description is the escalation's reason "
        "('<description_prefix>: <tool>'), not HITL's '<prefix>\\n\\nTool: <tool>\\nArgs: "
        "<args>': ApprovalMiddleware._call_gate computes HITL's text only for an agent the "
        "application invokes itself (_engine_free). By design for now: the redaction and "
        "masking that keep withheld values from approvers apply to the shown copy, not to "
        "free text, so the reason does not repeat the arguments."
    ),
)
async def test_a_batched_pauses_description_names_the_tool_and_its_arguments(
    through: Through,
) -> None:
    out = await through.start("batched", ("1", "get_forecast", {"location": "SF"}))
    [intr] = await through.interrupts("batched", out.thread_id)
    [action] = intr.value["action_requests"]
    assert PREFIX in action["description"]
    assert "Tool: get_forecast" in action["description"]
    assert "Args: {'location': 'SF'}" in action["description"]


async def test_a_per_call_pause_is_a_tool_approval_request_with_the_engines_keys(
    through: Through,
) -> None:
    out = await through.start("per_call", EMAIL)
    [intr] = await through.interrupts("per_call", out.thread_id)
    hitl = {k: v for k, v in intr.value.items() if k not in ENGINE_KEYS}
    assert hitl == {
        "type": "tool_approval",
        "tool_call_id": "call_email",
        "name": "send_email",
        "args": {"to": "alice"},
        "description": "Email",
    }
    assert set(intr.value) - set(hitl) == ENGINE_KEYS
    assert intr.value["request_id"] == out.pending[0]
    assert intr.value["allowed_decisions"] == ["approve", "edit", "reject", "respond"]


async def test_a_per_call_pause_offers_hitls_response_schema(through: Through) -> None:
    out = await through.start("per_call", EMAIL)
    [intr] = await through.interrupts("per_call", out.thread_id)
    schema = intr.response_schema
    assert isinstance(schema, dict)
    assert schema["oneOf"] == [
        {"$ref": "#/$defs/ApproveDecision"},
        {"$ref": "#/$defs/EditDecision"},
        {"$ref": "#/$defs/RejectDecision"},
        {"$ref": "#/$defs/RespondDecision"},
    ]
    assert schema["$defs"]["EditedAction"]["properties"]["name"]["const"] == "send_email"


FOUR = [
    ("call_email", "send_email", {"to": "alice", "cc": "carol"}),
    ("call_delete", "delete_file", {"path": "x.txt"}),
    ("call_delete_tmp", "delete_file", {"path": "tmp.txt"}),
    ("call_read", "read_file", {"path": "y.txt"}),
]


async def test_per_call_pauses_each_gated_call_and_applies_each_decision_to_its_own(
    through: Through,
) -> None:
    out = await through.start("per_call_cc", *FOUR)
    paused = {
        i.value["tool_call_id"]: i for i in await through.interrupts("per_call_cc", out.thread_id)
    }
    assert set(paused) == {"call_email", "call_delete"}
    assert paused["call_delete"].value["args"] == {"path": "x.txt"}
    assert paused["call_email"].id != paused["call_delete"].id
    # A call nothing gates, or that ``when`` lets through, ran without waiting.
    assert await through.ran(out.run_id, "call_delete_tmp") == [{"path": "tmp.txt"}]
    assert await through.ran(out.run_id, "call_read") == [{"path": "y.txt"}]
    waiting = await through.waiting(out.run_id)

    # A decision the call does not offer is refused and changes nothing.
    refused = await through.decide(waiting["call_delete"], {"type": "respond", "message": "x"})
    assert refused.status_code == 422, refused.text
    # The edit replaces the arguments: ``cc`` is not carried over from the model's call.
    await through.decide_and_resume(waiting["call_email"], TO_BOB)
    [still] = await through.interrupts("per_call_cc", out.thread_id)
    assert still.value["tool_call_id"] == "call_delete"
    assert still.value["request_id"] == waiting["call_delete"]
    await through.decide_and_resume(
        waiting["call_delete"], {"type": "reject", "message": "keep it"}
    )

    # Nothing ran twice.
    assert await through.ran(out.run_id, "call_email") == [{"to": "bob", "cc": None}]
    assert await through.ran(out.run_id, "call_delete") == []
    assert await through.ran(out.run_id, "call_delete_tmp") == [{"path": "tmp.txt"}]
    assert await through.ran(out.run_id, "call_read") == [{"path": "y.txt"}]
    results = {r["id"]: r for r in await through.seen(out.run_id)}
    email = results["call_email"]["content"]
    # (The arguments the notice names, exactly: the xfail test below.)
    assert email.startswith(f"{_EDIT_NOTICE} Executed instead: send_email with arguments {{")
    assert email.endswith("}.\n\nTool response:\nsent to bob")
    assert '"to": "bob"' in email
    assert "carol" not in email
    assert results["call_delete"]["status"] == "error"
    assert results["call_delete"]["content"] == rejected("delete_file", "keep it")
    assert await through.interrupts("per_call_cc", out.thread_id) == []
    assert_paired(await through.messages("per_call_cc", out.thread_id))


DEFAULTS_FILLED = (
    "The engine keeps an edit's arguments as the tool parses them (web/engine/edits.py "
    "recheck_edit: tool.validate(...).model_dump(), stored as JSONB) and shows a call's "
    "arguments validated the same way: a default the reviewer (or the model) left out is "
    "filled in ({'cc': None}), where HITL names the arguments as given. By design: the "
    "approver sees, and the decision's identity binds, exactly the arguments that will run."
)


@pytest.mark.xfail(strict=True, reason=DEFAULTS_FILLED)
async def test_the_edit_notice_names_the_arguments_the_reviewer_gave(through: Through) -> None:
    out = await through.start("per_call_cc", EMAIL)
    await through.decide_and_resume(out.pending[0], TO_BOB)
    [message] = await through.seen(out.run_id)
    assert 'Executed instead: send_email with arguments {"to": "bob"}.' in message["content"]


@pytest.mark.xfail(strict=True, reason=DEFAULTS_FILLED)
async def test_a_pause_shows_the_arguments_as_the_model_sent_them(through: Through) -> None:
    out = await through.start("per_call_cc", EMAIL)
    [intr] = await through.interrupts("per_call_cc", out.thread_id)
    assert intr.value["args"] == {"to": "alice"}
