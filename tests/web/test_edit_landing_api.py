"""Over the real API (issue 30, item 1): a support approver's edit of a 25.00 refund into 980.50
on another order lands in a rule that lets support only answer or reject; the edit never runs on
the editor's word. It becomes a request under that rule, with that rule's offer: nobody can
approve it, and the editor cannot decide it at all."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.edit_landing_graphs import GRAPHS
from tests.integration.helpers import person_token, until
from tests.web.conftest import Server
from web.engine import Engine
from web.settings import Settings

BIG = {"order_id": "1004", "amount": 980.5, "reason": "customer request"}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"graphs": GRAPHS})


@pytest.fixture
def web_settings(web_settings: Settings) -> Settings:
    return web_settings.model_copy(update={"graphs": GRAPHS})


def client(server: Server, secret: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=server.url, headers={"authorization": f"Bearer {secret}"}, timeout=60
    )


async def test_an_api_edit_into_a_rule_that_never_approves_never_runs(
    server: Server, engine: Engine
) -> None:
    out = await engine.runner.start(
        "refund-answer-only", {"message": "refund 1001"}, principal="local:alice"
    )
    assert out.status == "waiting", out
    sue = await person_token(engine, "sue", "support")
    tom = await person_token(engine, "tom", "support")

    async with client(server, sue) as api:
        shown = (await api.get(f"/api/v1/pending/{out.pending[0]}")).json()
        assert shown["args"]["amount"] == 25.0
        assert "edit" in shown["allowed_decisions"]
        decided = await api.post(
            f"/api/v1/pending/{out.pending[0]}/decision",
            json={"decision": "approve", "args": BIG},
        )
        # Taken as a proposal, not as an approval of what would run (see the next request).
        assert decided.status_code == 200, decided.text

    # The server's worker resumes the run: the edited call pauses it again, under its rule.
    # (This test's database holds this one run.)
    await until(engine, "select count(*) = 1 from approval_requests where status = 'pending'")
    await until(engine, "select status = 'waiting' from runs")
    assert await engine.effects.for_call(out.run_id, "refund-1001") == []
    landed = next(r for r in await engine.requests.for_run(out.run_id) if r.status == "pending")
    assert landed.shown["rule"] == "big-refunds-answer-only"

    async with client(server, tom) as api:
        listed = (await api.get(f"/api/v1/pending/{landed.id}")).json()
        assert listed["args"] == BIG
        assert listed["approvers"] == ["support"]
        assert listed["allowed_decisions"] == ["reject", "respond"]
        assert listed["may_decide"] is True
        approved = await api.post(
            f"/api/v1/pending/{landed.id}/decision", json={"decision": "approve"}
        )
        assert approved.status_code == 422, approved.text
        assert "cannot be approved" in approved.json()["error"]["message"]
    async with client(server, sue) as api:
        # The editor proposed it: another support lead answers or rejects it.
        assert (await api.get(f"/api/v1/pending/{landed.id}")).json()["may_decide"] is False
        answered = await api.post(
            f"/api/v1/pending/{landed.id}/decision",
            json={"decision": "reject", "reason": "mine"},
        )
        assert answered.status_code == 403, answered.text

    run = await engine.runs.get(out.run_id)
    assert run is not None
    assert run.status == "waiting"
    assert "980.50" not in (run.answer or "")
    assert await engine.effects.for_call(out.run_id, "refund-1001") == []
