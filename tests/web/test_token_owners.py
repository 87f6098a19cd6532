"""API tokens belong to people, over real HTTP: the rules compare the person behind a principal
(a token's owner), so one person's token and web account are one approver."""

from __future__ import annotations

import httpx

from tests.integration.helpers import scalar
from tests.web.conftest import PASSWORD, Server, SignIn, csrf_of
from web.engine import Engine


def client(server: Server, secret: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=server.url, headers={"authorization": f"Bearer {secret}"}, timeout=60
    )


async def owned_token(engine: Engine, name: str, owner: str, *groups: str) -> str:
    return await engine.accounts.create_token(name, list(groups), "test", owner=owner)


async def start_refund(server: Server, secret: str) -> tuple[str, str]:
    """A refund of 25.00 (support decides it) started over the API; its run and request."""
    async with client(server, secret) as api:
        started = await api.post(
            "/api/v1/runs", json={"graph": "refund", "input": {"message": "refund 1001"}}
        )
    assert started.status_code == 200, started.text
    assert started.json()["status"] == "waiting"
    return started.json()["run_id"], started.json()["pending"][0]


async def test_a_run_started_with_a_persons_token_cannot_be_approved_by_that_person(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await engine.accounts.add_user("alice", PASSWORD, ["support", "agents"])
    await engine.accounts.add_user("bob", PASSWORD, ["support"])
    starter = await owned_token(engine, "alice-bot", "alice", "agents", "support")
    other = await owned_token(engine, "alice-ci", "alice", "support")
    _, request_id = await start_refund(server, starter)

    # Her web account: the page says why, and the form post is refused.
    alice = sign_in("alice")
    page = alice.get(f"/requests/{request_id}")
    assert page.status_code == 200
    assert "you started this run (separation of duties)" in page.text
    refused_page = alice.post(f"/requests/{request_id}/approve", data={"csrf": csrf_of(page.text)})
    assert refused_page.status_code == 403
    # Another of her tokens, over the API.
    async with client(server, other) as api:
        shown = (await api.get(f"/api/v1/pending/{request_id}")).json()
        refused_api = await api.post(
            f"/api/v1/pending/{request_id}/decision", json={"decision": "approve"}
        )
    assert shown["may_decide"] is False
    assert refused_api.status_code == 403
    assert "separation of duties" in refused_api.json()["error"]["message"]
    assert await scalar(engine, "select count(*) from decisions") == 0

    # Someone else may.
    bob = sign_in("bob")
    page_b = bob.get(f"/requests/{request_id}")
    approved = bob.post(f"/requests/{request_id}/approve", data={"csrf": csrf_of(page_b.text)})
    assert approved.status_code == 303
    assert await scalar(engine, "select principal from decisions") == "local:bob"


async def test_a_service_token_starts_runs_but_never_decides(
    server: Server, engine: Engine
) -> None:
    shop = await engine.accounts.create_token("shop", ["agents"], "test", owner=None)
    desk = await engine.accounts.create_token("desk", ["support"], "test", owner=None)
    _, request_id = await start_refund(server, shop)
    async with client(server, desk) as api:
        shown = await api.get(f"/api/v1/pending/{request_id}")
        refused = await api.post(
            f"/api/v1/pending/{request_id}/decision", json={"decision": "approve"}
        )
    assert shown.status_code == 200  # it sees what its groups show it
    assert shown.json()["may_decide"] is False
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden"
    assert "service token" in refused.json()["error"]["message"]
    assert await scalar(engine, "select status from approval_requests") == "pending"
    assert await scalar(engine, "select count(*) from decisions") == 0


async def test_a_token_whose_owner_is_disabled_is_refused(server: Server, engine: Engine) -> None:
    await engine.accounts.add_user("alice", PASSWORD, ["support"])
    secret = await owned_token(engine, "alice-bot", "alice", "support")
    async with client(server, secret) as api:
        assert (await api.get("/api/v1/pending")).status_code == 200
        await engine.accounts.disable_user("alice")
        refused = await api.get("/api/v1/pending")
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "unauthenticated"
    assert "owner's account is disabled" in refused.json()["error"]["message"]
