"""Attacks on OpenAI-SDK requests through the pages and the API, over real HTTP: the run's
starter deciding through another of their principals (separation of duties counts people),
an approver outside the request's group, and decisions the SDK cannot honour (respond, edit)
offered by a forged form. Each is refused and decides nothing."""

from __future__ import annotations

import pytest

from tests.integration.helpers import person_token, scalar
from tests.web.conftest import Server, SignIn, add_user, csrf_of
from tests.web.test_api import client
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _start_as(server: Server, secret: str, message: str = "refund 1001") -> str:
    async with client(server, secret) as api:
        response = await api.post(
            "/api/v1/runs", json={"graph": "refund_openai", "input": {"message": message}}
        )
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "waiting", response.json()
    return str(response.json()["pending"][0])


async def test_the_starter_cannot_decide_on_the_pages_through_their_web_account(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    # "both" starts the run with their token, then signs in to the web app: one person.
    both = await person_token(engine, "both", "support", "agents")
    request_id = await _start_as(server, both)
    page = sign_in("both")
    shown = page.get(f"/requests/{request_id}")
    assert shown.status_code == 200
    assert "separation of duties" in shown.text
    csrf = csrf_of(shown.text)
    approve = page.post(f"/requests/{request_id}/approve", data={"csrf": csrf})
    reject = page.post(
        f"/requests/{request_id}/reject", data={"csrf": csrf, "reason": "my own call"}
    )
    assert approve.status_code == 403, approve.text
    assert reject.status_code == 403, reject.text
    assert await scalar(engine, "select count(*) from decisions") == 0


async def test_an_approver_outside_the_group_gets_404_on_the_pages(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    shop = await person_token(engine, "shop", "agents")
    request_id = await _start_as(server, shop)  # 25.00: support's
    await add_user(engine, "fin", "finance")
    page = sign_in("fin")
    csrf = csrf_of(page.get("/").text)
    assert page.get(f"/requests/{request_id}").status_code == 404
    for action, data in (
        ("approve", {}),
        ("reject", {"reason": "no"}),
        ("respond", {"message": "done"}),
        ("edit", {"arg.amount": "1"}),
    ):
        response = page.post(f"/requests/{request_id}/{action}", data={"csrf": csrf, **data})
        assert response.status_code == 404, (action, response.status_code)
    assert await scalar(engine, "select count(*) from decisions") == 0


async def test_a_forged_respond_or_edit_on_an_sdk_request_decides_nothing(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    shop = await person_token(engine, "shop", "agents")
    request_id = await _start_as(server, shop)
    lead = await person_token(engine, "lead", "support")
    async with client(server, lead) as api:
        respond = await api.post(
            f"/api/v1/pending/{request_id}/decision",
            json={"decision": "respond", "message": "refunded by hand"},
        )
        assert respond.status_code == 422, respond.text
    page = sign_in("lead")
    shown = page.get(f"/requests/{request_id}")
    assert shown.status_code == 200
    csrf = csrf_of(shown.text)
    # The page offers neither; a hand-made form posts them anyway.
    forged_respond = page.post(
        f"/requests/{request_id}/respond", data={"csrf": csrf, "message": "refunded by hand"}
    )
    forged_edit = page.post(
        f"/requests/{request_id}/edit",
        data={"csrf": csrf, "arg.order_id": "1001", "arg.amount": "900", "arg.reason": "x"},
    )
    assert forged_respond.status_code in (403, 409, 422), forged_respond.status_code
    assert forged_edit.status_code in (403, 409, 422), forged_edit.status_code
    assert await scalar(engine, "select count(*) from decisions") == 0
    stored = await engine.requests.get(request_id)
    assert stored is not None
    assert stored.status == "pending"
