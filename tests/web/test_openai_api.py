"""An OpenAI Agents SDK run over real HTTP: started through the API, decided by an authorized
approver, resumed by the server's worker; and the attacks a client-side ``RunState`` invites
(a forged, unknown or decided id; an approver outside the group) are refused."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.integration.helpers import person_token, scalar
from tests.web.conftest import Server
from tests.web.test_api import client, wait_for_run
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def started(server: Server, engine: Engine, message: str = "refund 1001") -> Any:
    shop = await person_token(engine, "shop", "agents")
    async with client(server, shop) as api:
        response = await api.post(
            "/api/v1/runs", json={"graph": "refund_openai", "input": {"message": message}}
        )
    assert response.status_code == 200, response.text
    run = response.json()
    assert run["status"] == "waiting", run
    return run


async def operator_report(server: Server, engine: Engine, run_id: str) -> Any:
    """The run's report as an operator reads it: its answer included."""
    async with client(server, await person_token(engine, "opal", "operators")) as api:
        return (await api.get(f"/api/v1/runs/{run_id}")).json()


async def test_an_authorized_approver_decides_over_http_and_the_worker_resumes_once(
    server: Server, engine: Engine
) -> None:
    run = await started(server, engine)
    [request_id] = run["pending"]
    support = await person_token(engine, "lead", "support")
    async with client(server, support) as api:
        shown = (await api.get(f"/api/v1/pending/{request_id}")).json()
        assert shown["tool"] == "issue_refund"
        assert shown["args"] == {"order_id": "1001", "amount": 25.0, "reason": "customer request"}
        assert shown["may_decide"] is True
        # The SDK's state is never sent to a client.
        assert "state" not in shown
        assert "current_step" not in str(shown)
        # The SDK has no edit decision: an edit is refused, and the request stays pending.
        edit = await api.post(
            f"/api/v1/pending/{request_id}/decision",
            json={"decision": "edit", "args": {**shown["args"], "amount": 1.0}},
        )
        assert edit.status_code == 422, edit.text
        decided = await api.post(
            f"/api/v1/pending/{request_id}/decision", json={"decision": "approve"}
        )
        assert decided.status_code == 200, decided.text
        again = await api.post(
            f"/api/v1/pending/{request_id}/decision", json={"decision": "approve"}
        )
        assert again.status_code == 409
        report = await wait_for_run(api, run["run_id"], "completed")
        assert "current_step" not in str(report)
    assert report["status"] == "completed", report
    assert report["answer"] is None  # the run's text is its starter's and operators'
    assert (await operator_report(server, engine, run["run_id"]))[
        "answer"
    ] == "Refunded 25.00 on order 1001."
    assert await scalar(engine, "select count(*) from demo_side_effects") == 1


async def test_unknown_forged_and_outside_the_group_are_404_and_decide_nothing(
    server: Server, engine: Engine
) -> None:
    run = await started(server, engine)
    [request_id] = run["pending"]
    finance = await person_token(engine, "fin", "finance")  # 25.00 goes to support
    async with client(server, finance) as api:
        hidden = await api.post(
            f"/api/v1/pending/{request_id}/decision", json={"decision": "approve"}
        )
        unknown = await api.post(
            "/api/v1/pending/00000000-0000-4000-8000-000000000000/decision",
            json={"decision": "approve"},
        )
        forged = await api.post(
            "/api/v1/pending/refund-1001/decision", json={"decision": "approve"}
        )
    for response in (hidden, unknown, forged):
        assert response.status_code == 404, response.text
    assert hidden.json() == unknown.json()
    assert await scalar(engine, "select count(*) from decisions") == 0


async def test_the_runs_own_starter_may_see_but_not_decide_403(
    server: Server, engine: Engine
) -> None:
    both = await person_token(engine, "both", "support", "agents")
    async with client(server, both) as api:
        response = await api.post(
            "/api/v1/runs", json={"graph": "refund_openai", "input": {"message": "refund 1001"}}
        )
        request_id = response.json()["pending"][0]
        refused = await api.post(
            f"/api/v1/pending/{request_id}/decision", json={"decision": "approve"}
        )
    assert refused.status_code == 403
    assert await scalar(engine, "select count(*) from decisions") == 0


async def test_a_rejection_over_http_reaches_the_model_and_runs_nothing(
    server: Server, engine: Engine
) -> None:
    run = await started(server, engine)
    [request_id] = run["pending"]
    support = await person_token(engine, "lead", "support")
    async with client(server, support) as api:
        decided = await api.post(
            f"/api/v1/pending/{request_id}/decision",
            json={"decision": "reject", "reason": "the customer withdrew the request"},
        )
        assert decided.status_code == 200, decided.text
        report = await wait_for_run(api, run["run_id"], "completed")
    assert report["answer"] is None
    answer = (await operator_report(server, engine, run["run_id"]))["answer"]
    assert "the customer withdrew the request" in str(answer)
    assert await scalar(engine, "select count(*) from demo_side_effects") == 0


async def test_bad_input_for_an_openai_agent_is_422(server: Server, engine: Engine) -> None:
    shop = await person_token(engine, "shop", "agents")
    async with client(server, shop) as api:
        response = await api.post(
            "/api/v1/runs", json={"graph": "refund_openai", "input": {"messages": "hi"}}
        )
        sdk_items = await api.post(
            "/api/v1/runs",
            json={
                "graph": "refund_openai",
                "input": {"input": [{"role": "user", "content": "refund 1001"}]},
            },
        )
    assert response.status_code == 422, response.text
    assert sdk_items.status_code == 200, sdk_items.text
    assert sdk_items.json()["status"] == "waiting"
    assert httpx.codes.is_success(sdk_items.status_code)


#: Inputs an OpenAI-SDK run refuses: NUL and lone surrogates (which PostgreSQL's text and
#: jsonb cannot hold) anywhere in a message or an input item, and malformed shapes.
UNSAFE_INPUTS: list[dict[str, Any]] = [
    {"message": "refund 1001\u0000"},
    {"message": "refund \ud800 1001"},
    {"input": [{"role": "user", "content": "refund 1001\u0000"}]},
    {"input": [{"role": "user", "content": [{"type": "input_text", "text": "\udfff"}]}]},
    {"input": [{"role": "user\u0000", "content": "refund 1001"}]},
    {"message": "x" * 20_001},
    {"input": []},
    {"input": ["refund 1001"]},
    {"message": "refund 1001", "input": [{"role": "user", "content": "refund 1002"}]},
]


async def test_unsafe_input_for_an_openai_agent_is_422_and_writes_nothing(
    server: Server, engine: Engine
) -> None:
    shop = await person_token(engine, "shop", "agents")
    async with client(server, shop) as api:
        for given in UNSAFE_INPUTS:
            # Sent as JSON text: a lone surrogate has no UTF-8 form, only its escape.
            response = await api.post(
                "/api/v1/runs",
                content=json.dumps({"graph": "refund_openai", "input": given}),
                headers={"content-type": "application/json"},
            )
            assert response.status_code == 422, (given, response.text)
    assert await scalar(engine, "select count(*) from runs") == 0
    assert await scalar(engine, "select count(*) from openai_run_states") == 0
