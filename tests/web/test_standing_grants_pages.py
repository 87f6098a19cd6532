"""Standing grants on the request page, over real HTTP: the approve and reject forms carry an
"always" button (with what it would cover) only where the request's rule allows it, and the
button makes the grant; a forged "always" on any other request decides nothing."""

from __future__ import annotations

import pytest

from tests.integration.helpers import scalar
from tests.integration.test_standing_grants import start
from tests.waiting import eventually
from tests.web.conftest import SignIn, add_user, csrf_of
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_the_always_button_makes_a_grant_where_the_rule_offers_it(
    engine: Engine, sign_in: SignIn
) -> None:
    run = await start(engine, "pay:50 pay:60")
    [request_id] = run.pending
    await add_user(engine, "ann", "approvers")
    page = sign_in("ann")
    shown = page.get(f"/requests/{request_id}")
    assert shown.status_code == 200, shown.text
    assert 'id="approve-always"' in shown.text
    assert 'id="reject-always"' in shown.text
    assert "amount ≤ 100" in shown.text
    decided = page.post(
        f"/requests/{request_id}/approve", data={"csrf": csrf_of(shown.text), "always": "1"}
    )
    assert decided.status_code == 303, decided.text
    [grant] = await engine.grants_of(run.run_id, by="ops")
    assert grant.granted_by == "local:ann"
    assert grant.ruling == "approve"

    # The served app's own worker does not know this test's graph: it may hold the job for a
    # moment (and then leave it queued) while this drain looks for it.
    async def resumed() -> bool:
        await engine.drain()
        finished = await engine.runs.get(run.run_id)
        return finished is not None and finished.status == "completed"

    await eventually(resumed, timeout=30, what="the run to be resumed and completed")


async def test_a_forged_always_where_the_rule_does_not_offer_it_decides_nothing(
    engine: Engine, sign_in: SignIn
) -> None:
    run = await start(engine, "wire:x")
    [request_id] = run.pending
    await add_user(engine, "ann", "approvers")
    page = sign_in("ann")
    shown = page.get(f"/requests/{request_id}")
    assert "-always" not in shown.text
    csrf = csrf_of(shown.text)
    for action, data in (("approve", {}), ("reject", {"reason": "no"})):
        forged = page.post(
            f"/requests/{request_id}/{action}", data={"csrf": csrf, "always": "1", **data}
        )
        assert forged.status_code == 422, (action, forged.status_code)
    assert await scalar(engine, "select count(*) from decisions") == 0
    assert await scalar(engine, "select count(*) from standing_grants") == 0
