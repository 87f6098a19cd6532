"""An insider's rewrite of a jsonb column to a value nested deeper than can be read back
(jsonb keeps it; the engine never writes one): an approval request holding one counts as
tampered, like a shown copy no digest can be taken of, and every other row is still listed;
where there is no tamper check (a run's input, the decision log's data), reading that one
value fails with ``StoredValueUnreadable``, never a ``RecursionError``."""

from __future__ import annotations

import pytest

from approvals.errors import ShownCopyChanged, StoredValueUnreadable
from approvals.identity import UNREPRESENTABLE, Unreadable
from approvals.listing import PendingOrder, Scope
from storage.audit import AuditFilter
from storage.db import json_loads, json_loads_or_unreadable
from tests.integration.helpers import scalar, start_refund
from web.engine import Engine

TAMPERED = "select count(*) from audit_events where request_id = %s and kind = 'request.tampered'"
FOUND = (
    "select data->>'found_digest' from audit_events"
    " where request_id = %s and kind = 'request.tampered'"
)


def nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


async def execute(engine: Engine, query: str, *params: object) -> None:
    async with engine.connection() as conn:
        await conn.execute(query, params)


async def listed(engine: Engine, order: PendingOrder = PendingOrder.DEADLINE) -> list[str]:
    page = await engine.pending_page(None, scope=Scope.SEE, order=order, limit=500)
    return [request.id for request, _ in page.items]


def test_a_value_nested_too_deeply_is_a_clear_error_or_unreadable() -> None:
    deep = nested(100_000).encode()
    with pytest.raises(StoredValueUnreadable, match="nested too deeply"):
        json_loads(deep)
    assert isinstance(json_loads_or_unreadable(deep), Unreadable)
    for value in (b'{"a": [1, {"b": null}]}', nested(300).encode(), b"123456789012345678901"):
        assert json_loads_or_unreadable(value) == json_loads(value)


@pytest.mark.parametrize(
    ("rewrite", "depth"),
    [
        *(("shown = %s::jsonb", depth) for depth in (1_000, 2_000, 10_000)),
        ("shown = jsonb_set(shown, '{args,amount}', %s::jsonb)", 1_000),
        ("shown = jsonb_set(shown, '{args,amount}', %s::jsonb)", 10_000),
        # Columns no digest covers: a value decoded as it stands is the insider's to write;
        # one that cannot be read at all makes the request's row unreadable.
        ("args_schema = %s::jsonb", 2_000),
        ("args_schema = %s::jsonb", 10_000),
        ("escalation_chain = %s::jsonb", 10_000),
    ],
)
async def test_a_request_column_nested_too_deeply_is_tampering_not_a_broken_inbox(
    engine: Engine, rewrite: str, depth: int
) -> None:
    """Left out of both inbox orders (the other request still listed), refused on its page
    and for decisions, recorded once as a copy no digest can be taken of."""
    first = (await start_refund(engine)).pending[0]
    second = (await start_refund(engine, "refund 1002")).pending[0]
    assert set(await listed(engine)) == {first, second}
    await execute(
        engine,
        f"update approval_requests set {rewrite} where id = %s",  # noqa: S608 (fixed texts)
        nested(depth),
        first,
    )
    for order in PendingOrder:
        assert await listed(engine, order) == [second]
    with pytest.raises(ShownCopyChanged):
        await engine.shown_request(first, viewer="local:ops")
    with pytest.raises(ShownCopyChanged):
        await engine.decide_as_operator(first, "approve", principal="local:ops")
    assert await scalar(engine, TAMPERED, first) == 1
    assert await scalar(engine, FOUND, first) == UNREPRESENTABLE
    # The run's other reads of its requests (its report, the console's list) still work.
    run_id = await scalar(engine, "select run_id::text from approval_requests where id = %s", first)
    assert first in [r.id for r in await engine.requests.for_run(run_id)]
    assert {r.id for r in await engine.requests.search(None)} >= {first, second}
    assert (await engine.audit.verify()).ok
    decided = await engine.decide_as_operator(second, "approve", principal="local:ops")
    assert decided.request_id == second


async def test_a_decided_request_nested_too_deeply_stays_in_the_history(engine: Engine) -> None:
    """The history lists who decided what (it shows no shown copy): a decided request whose
    copy cannot be read is still listed with the others, and its own page refuses it."""
    first = (await start_refund(engine)).pending[0]
    second = (await start_refund(engine, "refund 1002")).pending[0]
    for request_id in (first, second):
        await engine.decide_as_operator(request_id, "reject", principal="local:ops", reason="no")
    await execute(
        engine, "update approval_requests set shown = %s::jsonb where id = %s", nested(5_000), first
    )
    rows = await engine.requests.decided_page(
        engine.viewer(None), asof=await scalar(engine, "select now()"), limit=50
    )
    assert {request.id for request, _ in rows} == {first, second}
    with pytest.raises(ShownCopyChanged):
        await engine.shown_request(first, viewer="local:ops")
    assert await scalar(engine, TAMPERED, first) == 1


async def test_a_run_input_nested_too_deeply_fails_its_own_read_not_the_runs_list(
    engine: Engine,
) -> None:
    """No digest covers a run's input: the list (which shows none of it) still lists every
    run, and reading that run fails with a clear error, not a RecursionError."""
    first = await start_refund(engine)
    second = await start_refund(engine, "refund 1002")
    await execute(
        engine, "update runs set input = %s::jsonb where id = %s", nested(5_000), first.run_id
    )
    for _ in range(20):  # the pool hands its connections out in turn: each ran a listing
        listed_runs = await engine.runs.page(engine.viewer(None), limit=50)
        assert {str(run.id) for run in listed_runs} == {str(first.run_id), str(second.run_id)}
    for _ in range(20):  # and still reads such a value as an error, not as Unreadable
        with pytest.raises(StoredValueUnreadable):
            await engine.runs.get(str(first.run_id))
    assert await engine.runs.get(str(second.run_id)) is not None
    # The pending inbox does not read runs: both requests are still there.
    assert set(await listed(engine)) == {first.pending[0], second.pending[0]}


async def test_a_log_event_nested_too_deeply_is_a_clear_error_and_found_by_verify(
    engine: Engine,
) -> None:
    """The decision log's view shows each event's data, so it fails with a clear error
    rather than leave an event out or show it emptied; the chain's check reads the data as
    text and names the rewritten event."""
    await start_refund(engine)
    event = await scalar(engine, "select max(id) from audit_events")
    async with engine.connection() as conn, conn.transaction():
        # The log is append-only for the engine's role; an insider with the superuser is not.
        await conn.execute("set local session_replication_role = replica")
        await conn.execute(
            "update audit_events set data = %s::jsonb where id = %s", (nested(5_000), event)
        )
    with pytest.raises(StoredValueUnreadable):
        await engine.audit.search(AuditFilter(), limit=50)
    verified = await engine.audit.verify()
    assert not verified.ok
    assert verified.finding is not None
    assert str(event) in str(verified.finding)
