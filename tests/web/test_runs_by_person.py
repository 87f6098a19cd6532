"""A run is its starter's person's, not one principal's (issue 30, item 7): alice's tokens and
her web account see, cancel and continue the runs any of them started, as separation of duties
already counts her; another person still gets 404."""

from __future__ import annotations

import pytest

from approvals.errors import RunNotFound
from approvals.principals import Principal
from tests.integration.helpers import scalar
from tests.web.conftest import PASSWORD, Server
from tests.web.test_api import client
from web.engine import Engine

REFUND = {"graph": "refund", "input": {"message": "refund 1001"}}
#: Alice as her web session holds her (the engine calls the pages make).
ALICE_WEB = Principal.local("alice", frozenset({"agents"}))
BOB_WEB = Principal.local("bob", frozenset({"agents"}))


async def _people(engine: Engine) -> tuple[str, str, str]:
    """Alice's two tokens and bob's one; both are accounts in ``agents`` (no approver group)."""
    for name in ("alice", "bob"):
        await engine.accounts.add_user(name, PASSWORD, ["agents"])
    laptop = await engine.accounts.create_token("alice-laptop", ["agents"], "test", owner="alice")
    ci = await engine.accounts.create_token("alice-ci", ["agents"], "test", owner="alice")
    bob = await engine.accounts.create_token("bob-ci", ["agents"], "test", owner="bob")
    return laptop, ci, bob


async def test_a_run_started_with_one_of_alices_tokens_is_hers_everywhere(
    server: Server, engine: Engine
) -> None:
    laptop, ci, bob = await _people(engine)
    async with client(server, ci) as api:
        started = await api.post("/api/v1/runs", json={**REFUND, "thread_id": "alice-1"})
    assert started.status_code == 200, started.text
    run_id = started.json()["run_id"]

    # Another person sees nothing of it, and cannot cancel it.
    async with client(server, bob) as api:
        assert (await api.get(f"/api/v1/runs/{run_id}")).status_code == 404
        assert run_id not in {r["run_id"] for r in (await api.get("/api/v1/runs")).json()}
        assert (await api.post(f"/api/v1/runs/{run_id}/cancel", json={})).status_code == 404
    with pytest.raises(RunNotFound):
        await engine.report(run_id, viewer=BOB_WEB)

    # Her web account sees it, with what the run says (a starter's).
    report = await engine.report(run_id, viewer=ALICE_WEB)
    assert report["started_by"] == "token:alice-ci"
    page = await engine.runs_page(ALICE_WEB)
    assert run_id in {r.id for r in page.items}
    assert engine.rules.may_read_run(ALICE_WEB, await engine.visible_run(run_id, ALICE_WEB))

    # Her other token sees, lists and cancels it, then continues the thread.
    async with client(server, laptop) as api:
        shown = await api.get(f"/api/v1/runs/{run_id}")
        listed = await api.get("/api/v1/runs")
        cancelled = await api.post(f"/api/v1/runs/{run_id}/cancel", json={"reason": "mine"})
        continued = await api.post("/api/v1/runs", json={**REFUND, "thread_id": "alice-1"})
    assert shown.status_code == 200, shown.text
    assert run_id in {r["run_id"] for r in listed.json()}
    assert cancelled.status_code == 200, cancelled.text
    assert continued.status_code == 200, continued.text
    assert await scalar(engine, "SELECT count(*) FROM runs WHERE thread_id = 'alice-1'") == 2


async def test_a_run_started_in_alices_web_account_is_her_tokens_too(
    server: Server, engine: Engine
) -> None:
    laptop, _, bob = await _people(engine)
    outcome = await engine.start_run("refund", REFUND["input"], principal=ALICE_WEB)
    assert outcome.status == "waiting", outcome
    run_id = outcome.run_id

    async with client(server, bob) as api:
        assert (await api.get(f"/api/v1/runs/{run_id}")).status_code == 404
        assert (await api.post(f"/api/v1/runs/{run_id}/cancel", json={})).status_code == 404
    async with client(server, laptop) as api:
        shown = await api.get(f"/api/v1/runs/{run_id}")
        assert shown.status_code == 200, shown.text
        assert shown.json()["started_by"] == "local:alice"
        cancelled = await api.post(f"/api/v1/runs/{run_id}/cancel", json={})
    assert cancelled.status_code == 200, cancelled.text
    assert await scalar(engine, "SELECT status FROM runs WHERE id = %s", run_id) == "cancelled"


async def test_alices_web_account_cancels_what_her_token_started(
    server: Server, engine: Engine
) -> None:
    _, ci, _ = await _people(engine)
    async with client(server, ci) as api:
        started = await api.post("/api/v1/runs", json=REFUND)
    run_id = started.json()["run_id"]
    with pytest.raises(RunNotFound):
        await engine.cancel_run(run_id, by=BOB_WEB)
    cancelled = await engine.cancel_run(run_id, by=ALICE_WEB, reason="changed my mind")
    assert cancelled.to_json()["status"] == "cancelled"


async def test_a_service_tokens_runs_are_no_ones_but_its_own(
    server: Server, engine: Engine
) -> None:
    # A service token has no person: its runs are not anybody's by "person", and a person's
    # principal never matches it (NULL matches nothing).
    await engine.accounts.add_user("alice", PASSWORD, ["agents"])
    service = await engine.accounts.create_token("shop", ["agents"], "test", owner=None)
    async with client(server, service) as api:
        started = await api.post("/api/v1/runs", json=REFUND)
        run_id = started.json()["run_id"]
        assert (await api.get(f"/api/v1/runs/{run_id}")).status_code == 200
    with pytest.raises(RunNotFound):
        await engine.report(run_id, viewer=ALICE_WEB)
    other = await engine.accounts.create_token("shop2", ["agents"], "test", owner=None)
    async with client(server, other) as api:
        assert (await api.get(f"/api/v1/runs/{run_id}")).status_code == 404
