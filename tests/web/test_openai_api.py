"""An OpenAI Agents SDK run over real HTTP: started through the API, decided by an authorized
approver, resumed by the server's worker; and the attacks a client-side ``RunState`` invites
(a forged, unknown or decided id; an approver outside the group) are refused."""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn

from storage.openai_runs import PgOpenAIRunStates
from tests.integration.helpers import person_token, scalar
from tests.web.conftest import Server
from tests.web.test_api import client, wait_for_run
from web.app import create_app
from web.engine import Engine
from web.serving import server_config
from web.settings import Settings

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _wire(engine: Engine) -> None:
    """Give the server's engine the OpenAI run-state store (what ``web.engine`` must wire)."""
    from graphs.openai_host import openai_extras

    registry = engine.registry
    deps = registry.deps
    extras = {**deps.extras, **openai_extras(PgOpenAIRunStates(engine._db))}
    registry._deps = dataclasses.replace(deps, extras=extras)


@pytest.fixture
def openai_server(web_settings: Settings) -> Iterator[Server]:
    """The app with its worker under uvicorn (as ``tests.web.conftest.server``), its engine
    given the OpenAI run-state store once the worker built its graphs."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    settings = web_settings.model_copy(update={"public_url": url})
    app = create_app(settings, with_worker=True, migrate=False)
    uv = uvicorn.Server(server_config(app, settings))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not uv.started or "_graphs" not in app.state.engine.__dict__:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the web server did not start")
        time.sleep(0.02)
    _wire(app.state.engine)
    yield Server(url=url, settings=settings)
    uv.should_exit = True
    thread.join(timeout=15)
    sock.close()


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


async def test_an_authorized_approver_decides_over_http_and_the_worker_resumes_once(
    openai_server: Server, engine: Engine
) -> None:
    run = await started(openai_server, engine)
    [request_id] = run["pending"]
    support = await person_token(engine, "lead", "support")
    async with client(openai_server, support) as api:
        shown = (await api.get(f"/api/v1/pending/{request_id}")).json()
        assert shown["tool"] == "issue_refund"
        assert shown["args"] == {"order_id": "1001", "amount": 25.0, "reason": "customer request"}
        assert shown["may_decide"] is True
        # The SDK's state is never sent to a client.
        assert "state" not in shown
        assert "current_step" not in str(shown)
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
    assert report["answer"] == "Refunded 25.00 on order 1001."
    assert await scalar(engine, "select count(*) from demo_side_effects") == 1


async def test_unknown_forged_and_outside_the_group_are_404_and_decide_nothing(
    openai_server: Server, engine: Engine
) -> None:
    run = await started(openai_server, engine)
    [request_id] = run["pending"]
    finance = await person_token(engine, "fin", "finance")  # 25.00 goes to support
    async with client(openai_server, finance) as api:
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
    openai_server: Server, engine: Engine
) -> None:
    both = await person_token(engine, "both", "support", "agents")
    async with client(openai_server, both) as api:
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
    openai_server: Server, engine: Engine
) -> None:
    run = await started(openai_server, engine)
    [request_id] = run["pending"]
    support = await person_token(engine, "lead", "support")
    async with client(openai_server, support) as api:
        decided = await api.post(
            f"/api/v1/pending/{request_id}/decision",
            json={"decision": "reject", "reason": "the customer withdrew the request"},
        )
        assert decided.status_code == 200, decided.text
        report = await wait_for_run(api, run["run_id"], "completed")
    assert "the customer withdrew the request" in str(report["answer"])
    assert await scalar(engine, "select count(*) from demo_side_effects") == 0


async def test_bad_input_for_an_openai_agent_is_422(openai_server: Server, engine: Engine) -> None:
    shop = await person_token(engine, "shop", "agents")
    async with client(openai_server, shop) as api:
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
