"""An insider's rewrites of a listed request's row against the remembered shown-copy digests
(approvals.identity.checked_shown_digest): every column the digest covers is checked again at
the next listing, and a shown copy the digest cannot be taken of is refused, not a crash."""

from __future__ import annotations

import uuid

import pytest

from approvals.errors import ShownCopyChanged
from approvals.listing import Scope
from tests.integration.helpers import scalar, start_refund
from web.engine import Engine

TAMPERED = "select count(*) from audit_events where request_id = %s and kind = 'request.tampered'"


async def listed(engine: Engine) -> list[str]:
    page = await engine.pending_page(None, scope=Scope.SEE, limit=500)
    return [request.id for request, _ in page.items]


async def execute(engine: Engine, query: str, *params: object) -> None:
    async with engine.connection() as conn:
        await conn.execute(query, params)


@pytest.mark.parametrize(
    "rewrite",
    [
        "tool = 'refund_all'",
        "call_id = call_id || 'x'",
        "shown = jsonb_set(shown, '{args,amount}', to_jsonb((shown #>> '{args,amount}')::text))",
        "shown = shown || '{\"x\": null}'",
        'shown = shown || \'{"x": "null"}\'',
        "shown = jsonb_set(shown, '{args,amount}', '-0')",
        "shown = jsonb_set(shown, '{args,amount}', '1e1')",
    ],
)
async def test_a_column_the_digest_covers_rewritten_after_listing_is_caught(
    engine: Engine, rewrite: str
) -> None:
    first = (await start_refund(engine)).pending[0]
    second = (await start_refund(engine, "refund 1002")).pending[0]
    for _ in range(2):  # listed twice: remembered
        assert set(await listed(engine)) == {first, second}
    await execute(
        engine,
        f"update approval_requests set {rewrite} where id = %s",  # noqa: S608 (fixed texts)
        first,
    )
    assert await listed(engine) == [second]
    with pytest.raises(ShownCopyChanged):
        await engine.decide_as_operator(first, "approve", principal="local:ops")
    assert await scalar(engine, TAMPERED, first) == 1


@pytest.mark.parametrize(
    "number",
    [
        "9007199254740993",  # an integer past 2^53: the canonical form refuses it
        "18446744073709551616",  # past 64 bits
        "1e400",  # read back as an infinity
        "-1e400",
        pytest.param("[" * 200 + "1" + "]" * 200, id="nested-200"),  # past the core's limit
    ],
)
async def test_a_number_the_digest_cannot_be_taken_of_is_tampering_not_a_broken_inbox(
    engine: Engine, number: str
) -> None:
    """jsonb keeps any numeric; a shown copy rewritten to hold one the canonical form refuses
    is a changed copy like any other: left out of the listing (which still shows the other
    requests) and refused on its page and for decisions, recorded once."""
    first = (await start_refund(engine)).pending[0]
    second = (await start_refund(engine, "refund 1002")).pending[0]
    assert set(await listed(engine)) == {first, second}
    await execute(
        engine,
        "update approval_requests set shown = jsonb_set(shown, '{args,amount}', %s::jsonb)"
        " where id = %s",
        number,
        first,
    )
    assert await listed(engine) == [second]
    with pytest.raises(ShownCopyChanged):
        await engine.shown_request(first, viewer="local:ops")
    with pytest.raises(ShownCopyChanged):
        await engine.decide_as_operator(first, "approve", principal="local:ops")
    assert await scalar(engine, TAMPERED, first) == 1
    assert (await engine.audit.verify()).ok


async def test_listings_read_uuids_as_text_without_changing_what_the_pool_reads_after(
    engine: Engine,
) -> None:
    """The pending listings read uuid columns as text through their own cursor's adapters:
    the pooled connections they ran on still read uuids as ``uuid.UUID`` afterwards."""
    first = (await start_refund(engine)).pending[0]
    for _ in range(20):  # the pool hands its connections out in turn: each ran a listing
        assert await listed(engine) == [first]
    for _ in range(20):
        async with engine.connection() as conn:
            row = await (
                await conn.execute(
                    "select id, run_id from approval_requests where id = %s", (first,)
                )
            ).fetchone()
        assert row is not None
        assert isinstance(row["id"], uuid.UUID)
        assert isinstance(row["run_id"], uuid.UUID)
        assert str(row["id"]) == first
