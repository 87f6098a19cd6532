"""Respond: a person answers in an ask-a-human tool's place. The tool never runs, the model
receives the answer as the tool's (successful) result, the request is decided once, and only
where its tool's ``allowed_decisions`` offer respond; on real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from approvals.errors import InvalidDecision, InvalidValue, RequestNotPending
from approvals.model import DECISION_TYPES, DecisionRecord, RequestStatus
from tests.integration.helpers import scalar, side_effects
from tests.integration.inprocess import invoke
from web.engine import Engine, open_engine
from web.settings import Settings

GRAPHS = {
    "lc_ask": "tests.integration.respond_graphs:build",
    "lc_ask_policy": "tests.integration.respond_graphs:build_by_policy",
    "lc_refund": "tests.integration.middleware_graphs:build",
    "described": "tests.integration.middleware_graphs:described",
}
ANSWER = "Yes, refund it, but no more than 50 euros."


@pytest.fixture
async def lc(database_url: str, tmp_path: Path) -> Any:
    settings = Settings(
        database_url=database_url, config_file=tmp_path / "none.toml", graphs=GRAPHS
    )
    async with open_engine(database_url, settings) as engine:
        yield engine


async def _ask(engine: Engine, graph: str = "lc_ask", message: str | None = None) -> Any:
    text = message or "ask may I refund order 1001?"
    out = await engine.runner.start(graph, {"message": text}, principal="alice")
    assert out.status == "waiting", out
    return out


async def _nothing_consumed(engine: Engine, request_id: str) -> None:
    request = await engine.requests.get(request_id)
    assert request is not None
    assert request.status is RequestStatus.PENDING
    assert await scalar(engine, "select count(*) from decisions") == 0
    assert await scalar(engine, "select count(*) from resume_queue") == 0


async def test_an_answer_is_the_tools_result_for_the_model_and_the_tool_never_runs(
    lc: Engine,
) -> None:
    out = await _ask(lc)
    [request_id] = out.pending
    request = await lc.requests.get(request_id)
    assert request is not None
    # What the tool's allowed_decisions offer, nothing more: approving would run the stub.
    assert request.offered_decisions == ("reject", "respond")

    decision = await lc.decide_as_operator(request_id, "respond", principal="bob", message=ANSWER)
    assert decision.to_json()["decision"] == "respond"
    assert await lc.worker.drain() == 1

    run = await lc.runs.get(out.run_id)
    assert run is not None
    assert run.status == "completed", run
    # The scripted model repeats what it received: the answer, as a successful result.
    assert run.answer == f"success: {ANSWER}"
    assert await side_effects(lc, out.run_id, "ask-1") == []
    assert await lc.ledger.for_run(out.run_id) == []
    answered = await lc.requests.get(request_id)
    assert answered is not None
    assert answered.status is RequestStatus.ANSWERED
    # The answer is in the decision's audit event, with who gave it.
    data = await scalar(
        lc,
        "select data from audit_events where kind = 'request.decided' and request_id = %s",
        request_id,
    )
    assert data["decision"] == "respond"
    assert data["reason"] == ANSWER


async def test_a_tool_that_offers_only_respond_and_reject_cannot_be_approved(
    lc: Engine,
) -> None:
    out = await _ask(lc)
    with pytest.raises(InvalidDecision, match="offers: reject, respond"):
        await lc.decide_as_operator(out.pending[0], "approve", principal="bob")
    await _nothing_consumed(lc, out.pending[0])


async def test_racing_answers_have_one_winner_and_the_model_gets_the_winners_answer(
    lc: Engine,
) -> None:
    out = await _ask(lc)
    results = await asyncio.gather(
        lc.decide_as_operator(out.pending[0], "respond", principal="ann", message="ann says yes"),
        lc.decide_as_operator(out.pending[0], "respond", principal="rob", message="rob says no"),
        return_exceptions=True,
    )
    won = [r for r in results if not isinstance(r, BaseException)]
    lost = [r for r in results if isinstance(r, BaseException)]
    assert len(won) == 1
    assert isinstance(won[0], DecisionRecord)
    assert len(lost) == 1
    assert isinstance(lost[0], RequestNotPending), lost
    assert await scalar(lc, "select count(*) from decisions") == 1
    assert await scalar(lc, "select count(*) from resume_queue") == 1
    await lc.worker.drain()
    run = await lc.runs.get(out.run_id)
    assert run is not None
    assert run.answer == f"success: {won[0].reason}"
    assert await side_effects(lc, out.run_id, "ask-1") == []


async def test_respond_where_the_tool_does_not_offer_it_is_refused_and_nothing_consumed(
    lc: Engine,
) -> None:
    # allowed_decisions approve and reject: a refund is not the approver's to make up.
    out = await _ask(lc, "described", "refund 1001 25")
    with pytest.raises(InvalidDecision, match="cannot be answered"):
        await lc.decide_as_operator(out.pending[0], "respond", principal="bob", message="refunded")
    await _nothing_consumed(lc, out.pending[0])


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"message": ""}, InvalidDecision),
        ({"message": "   \n"}, InvalidDecision),
        ({}, InvalidDecision),
        ({"message": "x" * 2001}, InvalidDecision),
        ({"message": "nul \x00 inside"}, InvalidValue),
        ({"message": "ok", "reason": "why"}, InvalidDecision),
        ({"message": "ok", "args": {"question": "other"}}, InvalidDecision),
    ],
)
async def test_a_malformed_answer_is_refused_and_nothing_consumed(
    lc: Engine, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    out = await _ask(lc)
    with pytest.raises(error):
        await lc.decide_as_operator(out.pending[0], "respond", principal="bob", **kwargs)
    await _nothing_consumed(lc, out.pending[0])


async def test_a_message_goes_with_respond_only(lc: Engine) -> None:
    out = await _ask(lc, "lc_refund", "refund 1001 25")
    with pytest.raises(InvalidDecision, match="only goes with respond"):
        await lc.decide_as_operator(out.pending[0], "approve", principal="bob", message="sure")
    await _nothing_consumed(lc, out.pending[0])


async def test_interrupt_on_true_offers_every_decision_as_human_in_the_loop_does(
    lc: Engine,
) -> None:
    out = await _ask(lc, "lc_refund", "refund 1001 25")
    request = await lc.requests.get(out.pending[0])
    assert request is not None
    assert request.offered_decisions == DECISION_TYPES
    await lc.decide_as_operator(out.pending[0], "respond", principal="bob", message="done by hand")
    await lc.worker.drain()
    run = await lc.runs.get(out.run_id)
    assert run is not None
    assert run.answer == "success: done by hand"
    assert await side_effects(lc, out.run_id, "refund-1001") == []


async def test_the_cli_responds_with_a_message_and_refuses_an_empty_one(
    lc: Engine, cli_env: dict[str, str]
) -> None:
    out = await _ask(lc)
    [request_id] = out.pending
    # --as bob: the account bob.
    await lc.accounts.add_user("bob", "correct horse battery staple", ["support"])
    empty = await invoke(cli_env, "decide", request_id, "respond", "--message", " ", "--as", "bob")
    assert empty.code == 2, (empty.stdout, empty.stderr)
    await _nothing_consumed(lc, request_id)

    decided = await invoke(
        cli_env, "decide", request_id, "respond", "--message", ANSWER, "--as", "bob"
    )
    assert decided.code == 0, decided.stderr
    body = json.loads(decided.stdout)
    assert body["decision"] == "respond"
    assert body["reason"] == ANSWER
    await lc.worker.drain()
    run = await lc.runs.get(out.run_id)
    assert run is not None
    assert run.answer == f"success: {ANSWER}"
    assert await side_effects(lc, out.run_id, "ask-1") == []


async def test_a_policy_rule_offers_respond_and_the_answer_reaches_the_model(lc: Engine) -> None:
    out = await _ask(lc, "lc_ask_policy")
    [request_id] = out.pending
    request = await lc.requests.get(request_id)
    assert request is not None
    assert request.offered_decisions == ("reject", "respond")
    assert request.approvers == ("managers",)
    with pytest.raises(InvalidDecision, match="offers: reject, respond"):
        await lc.decide_as_operator(request_id, "approve", principal="bob")
    await _nothing_consumed(lc, request_id)
    await lc.decide_as_operator(request_id, "respond", principal="bob", message=ANSWER)
    assert await lc.worker.drain() == 1
    run = await lc.runs.get(out.run_id)
    assert run is not None
    assert run.status == "completed", run
    assert run.answer == f"success: {ANSWER}"
