"""A listing checks every shown copy's digest each time, remembered digests or not: a copy
rewritten behind the engine's back after it was listed leaves the inbox at the next listing,
and comes back when it is put back as it was."""

from __future__ import annotations

from typing import Any

from approvals.listing import Scope
from tests.integration.helpers import scalar, start_refund
from web.engine import Engine


async def listed(engine: Engine) -> list[str]:
    page = await engine.pending_page(None, scope=Scope.SEE, limit=500)
    return [request.id for request, _ in page.items]


async def rewrite_shown(engine: Engine, request_id: str, shown: Any) -> None:
    async with engine.connection() as conn:
        await conn.execute(
            "update approval_requests set shown = %s::jsonb where id = %s",
            (shown, request_id),
        )


async def test_a_copy_rewritten_after_it_was_listed_is_left_out_then_back(engine: Engine) -> None:
    first = (await start_refund(engine)).pending[0]
    second = (await start_refund(engine, "refund 1002")).pending[0]
    for _ in range(3):  # listed, so remembered
        assert set(await listed(engine)) == {first, second}
    original = await scalar(
        engine, "select shown::text from approval_requests where id = %s", first
    )

    async with engine.connection() as conn:
        await conn.execute(
            "update approval_requests set shown = jsonb_set(shown, '{args,amount}', '1')"
            " where id = %s",
            (first,),
        )
    changed = await scalar(engine, "select shown::text from approval_requests where id = %s", first)
    assert changed != original
    assert await listed(engine) == [second]
    assert await listed(engine) == [second]
    tampered = (
        "select count(*) from audit_events where request_id = %s and kind = 'request.tampered'"
    )
    assert await scalar(engine, tampered, first) == 1

    await rewrite_shown(engine, first, original)
    assert set(await listed(engine)) == {first, second}
    assert (await engine.audit.verify()).ok
