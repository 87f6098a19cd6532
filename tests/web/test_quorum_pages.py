"""A request that needs two approvers, decided in the browser-facing pages."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.governed_graphs import GRAPHS
from tests.integration.helpers import scalar
from tests.web.conftest import Server, SignIn, add_user, csrf_of
from tests.web.test_pages import wait_for
from web.engine import Engine
from web.settings import Settings


@pytest.fixture
def web_settings(web_settings: Settings) -> Settings:
    return web_settings.model_copy(update={"graphs": GRAPHS})


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The test's own engine knows the quorum graph too."""
    return settings.model_copy(update={"graphs": GRAPHS})


async def test_two_approvers_in_the_pages(server: Server, engine: Engine, sign_in: SignIn) -> None:
    await add_user(engine, "ann", "support")
    await add_user(engine, "bob", "support")
    out = await engine.runner.start("quorum", {"message": "refund 1001"}, principal="local:shop")
    request_id = out.pending[0]
    ann, bob = sign_in("ann"), sign_in("bob")
    page = ann.get(f"/requests/{request_id}")
    assert "2 distinct approvers (0 so far)" in page.text
    assert 'id="edit"' not in page.text  # a quorum request cannot be edited
    assert (
        ann.post(f"/requests/{request_id}/approve", data={"csrf": csrf_of(page.text)}).status_code
        == 303
    )
    again = ann.get(f"/requests/{request_id}")
    assert "2 distinct approvers (1 so far: local:ann)" in again.text
    assert "you already approved it" in again.text
    twice = ann.post(f"/requests/{request_id}/approve", data={"csrf": csrf_of(again.text)})
    assert twice.status_code == 409
    page_b = bob.get(f"/requests/{request_id}")
    assert (
        bob.post(f"/requests/{request_id}/approve", data={"csrf": csrf_of(page_b.text)}).status_code
        == 303
    )
    await wait_for(engine, out.run_id, "completed")
    assert await scalar(engine, "select count(*) from demo_side_effects") == 1


async def test_a_persons_token_and_web_account_are_one_approver(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "alice", "support")
    await add_user(engine, "bob", "support")
    secret = await engine.accounts.create_token("alice-bot", ["support"], "test", owner="alice")
    out = await engine.runner.start("quorum", {"message": "refund 1001"}, principal="local:shop")
    request_id = out.pending[0]
    async with httpx.AsyncClient(
        base_url=server.url, headers={"authorization": f"Bearer {secret}"}, timeout=30
    ) as api:
        voted = await api.post(
            f"/api/v1/pending/{request_id}/decision", json={"decision": "approve"}
        )
    assert voted.status_code == 202, voted.text
    alice = sign_in("alice")
    page = alice.get(f"/requests/{request_id}")
    assert "you already approved it (as token:alice-bot)" in page.text
    again = alice.post(f"/requests/{request_id}/approve", data={"csrf": csrf_of(page.text)})
    assert again.status_code == 409
    assert await scalar(engine, "select count(*) from approval_votes") == 1
    assert await scalar(engine, "select status from approval_requests") == "pending"
    bob = sign_in("bob")
    page_b = bob.get(f"/requests/{request_id}")
    approved = bob.post(f"/requests/{request_id}/approve", data={"csrf": csrf_of(page_b.text)})
    assert approved.status_code == 303
    assert await scalar(engine, "select status from approval_requests") == "approved"
