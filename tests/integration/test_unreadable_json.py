"""An insider's rewrite of a jsonb column to a value nested deeper than can be read back
(jsonb keeps it; the engine never writes one): an approval request holding one counts as
tampered, like a shown copy no digest can be taken of, and every other row is still listed;
a decision-log event holding one is listed marked unreadable, and fails the chain's check;
where there is no tamper check (a run's input), reading that one value fails with
``StoredValueUnreadable``, never a ``RecursionError``."""

from __future__ import annotations

import csv
import io
import json

import pytest

from approvals.errors import ShownCopyChanged, StoredValueUnreadable
from approvals.identity import UNREPRESENTABLE, Unreadable
from approvals.listing import PendingOrder, Scope
from storage.audit import AuditFilter
from storage.db import json_loads, json_loads_or_unreadable
from tests.integration.helpers import scalar, start_refund
from tests.integration.inprocess import invoke
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


async def rewrite_event(engine: Engine, event: int, *, rehash: bool = False) -> None:
    """An insider's rewrite of one log event's data to nesting too deep to read back (the log
    is append-only for the engine's role; the superuser is not). ``rehash``: its hash
    recomputed the way the chain's trigger computes it and the head moved to it, so the
    chain's links alone no longer tell (the event must be the last)."""
    async with engine.connection() as conn, conn.transaction():
        await conn.execute("set local session_replication_role = replica")
        await conn.execute(
            "update audit_events set data = %s::jsonb where id = %s", (nested(5_000), event)
        )
        if rehash:
            await conn.execute(
                "update audit_events e set hash = approvals_audit_hash_v1(e.prev_hash, e)"
                " where e.id = %s",
                (event,),
            )
            await conn.execute(
                "update audit_chain_head set hash = (select hash from audit_events where id = %s)",
                (event,),
            )


async def test_a_log_event_nested_too_deeply_is_shown_unreadable_and_fails_verify(
    engine: Engine,
) -> None:
    """The log's readers list every event, the rewritten one with no data and marked
    unreadable (neither left out, nor emptied to look like an event with no data, nor a
    failure of the whole list); the chain's check names it."""
    run = await start_refund(engine)
    other = await start_refund(engine, "refund 1002")
    event = await scalar(
        engine,
        "select id from audit_events where run_id = %s and kind = 'request.created'",
        run.run_id,
    )
    before = await engine.audit.search(AuditFilter(), limit=500)
    await rewrite_event(engine, event)

    after = await engine.audit.search(AuditFilter(), limit=500)
    assert [e["id"] for e in after] == [e["id"] for e in before]
    for row, was in zip(after, before, strict=True):
        if row["id"] == event:
            assert row["data"] is None
            assert row["data_unreadable"] is True
        else:
            assert row["data"] == was["data"]
            assert row["data_unreadable"] is False
    run_events = await engine.audit.for_run(str(run.run_id))
    marked = [e for e in run_events if e["data_unreadable"]]
    assert [(e["id"], e["data"]) for e in marked] == [(event, None)]
    assert len(run_events) > 1
    assert not any(e["data_unreadable"] for e in await engine.audit.for_run(str(other.run_id)))
    exported = [row async for row in engine.audit.export()]
    assert [e["id"] for e in exported] == sorted(e["id"] for e in before)
    assert [(e["id"], e["data"]) for e in exported if e["data_unreadable"]] == [(event, None)]

    verified = await engine.audit.verify()
    assert not verified.ok
    assert verified.finding is not None
    assert verified.finding.event_id == event
    assert verified.finding.problem == "changed"


async def test_a_log_event_nested_too_deeply_fails_verify_even_with_its_hash_recomputed(
    engine: Engine,
) -> None:
    """The engine never writes data nested that deep, so an event holding it was written
    outside the engine: the chain's check fails on it even when its hash and the chain's head
    were recomputed to match (as a rewrite of any other data would then pass)."""
    await start_refund(engine)
    event = await scalar(engine, "select max(id) from audit_events")
    intact = (await engine.audit.verify()).events
    await rewrite_event(engine, event, rehash=True)
    verified = await engine.audit.verify()
    assert not verified.ok, verified
    assert verified.finding is not None
    assert verified.finding.event_id == event
    assert verified.finding.problem == "changed"
    assert "nested too deeply" in verified.finding.detail
    assert verified.events == intact - 1


async def test_the_cli_lists_and_exports_an_unreadable_log_event_and_verify_names_it(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    """``audit export`` writes every event, the rewritten one as ``"data": null`` with
    ``"data_unreadable": true`` (JSON lines; a marker that is no JSON in CSV); the others as
    before; ``audit verify`` exits 1 naming it."""
    await start_refund(engine)
    event = await scalar(
        engine, "select id from audit_events where kind = 'request.created' limit 1"
    )
    total = await scalar(engine, "select count(*) from audit_events")
    await rewrite_event(engine, event)

    jsonl = await invoke(cli_env, "audit", "export")
    assert jsonl.code == 0, jsonl.stderr
    records = [json.loads(line) for line in jsonl.stdout.splitlines()]
    assert len(records) == total
    bad = next(r for r in records if r["id"] == event)
    assert bad["data"] is None
    assert bad["data_unreadable"] is True
    assert bad["kind"] == "request.created"
    for record in records:
        if record["id"] != event:
            assert "data_unreadable" not in record
            assert isinstance(record["data"], dict)

    table = await invoke(cli_env, "audit", "export", "--format", "csv")
    assert table.code == 0, table.stderr
    rows = list(csv.DictReader(io.StringIO(table.stdout)))
    assert len(rows) == total
    cell = next(r["data"] for r in rows if int(r["id"]) == event)
    assert cell == "unreadable (stored value could not be read)"
    with pytest.raises(json.JSONDecodeError):
        json.loads(cell)
    assert all(isinstance(json.loads(r["data"]), dict) for r in rows if int(r["id"]) != event)

    verify = await invoke(cli_env, "audit", "verify")
    assert verify.code == 1
    assert f"event {event} was changed" in verify.stderr
    as_json = await invoke(cli_env, "audit", "verify", "--json")
    assert as_json.code == 1
    assert as_json.json()["finding"]["event_id"] == event


async def planted_event(engine: Engine, data: str) -> int:
    """After a run's events, one with ``data`` (JSON text jsonb keeps), inserted through the
    chain's trigger as the runtime role may; its id."""
    await start_refund(engine)
    await execute(
        engine, "insert into audit_events (kind, data) values ('x.planted', %s::jsonb)", data
    )
    return int(await scalar(engine, "select max(id) from audit_events"))


async def test_a_log_event_with_a_number_too_long_to_read_is_listed_exported_and_named(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    """jsonb keeps an integer of 5,000 digits, which ``json.loads`` refuses to convert (a
    ValueError, not a RecursionError): one such event, inserted through the chain's trigger as
    the runtime role may, made the log's page a 500 and export and verify a traceback."""
    event = await planted_event(engine, '{"n": ' + "9" * 5_000 + "}")
    listed_events = await engine.audit.search(AuditFilter(), limit=500)
    [big] = [e for e in listed_events if e["id"] == event]
    assert (big["data"], big["data_unreadable"]) == (None, True)
    exported = await invoke(cli_env, "audit", "export")
    assert exported.code == 0, exported.stderr
    [record] = [r for r in map(json.loads, exported.stdout.splitlines()) if r["id"] == event]
    assert (record["data"], record["data_unreadable"]) == (None, True)
    verify = await invoke(cli_env, "audit", "verify")
    assert verify.code == 1, verify.stderr
    assert f"event {event} was changed" in verify.stderr


async def test_a_log_event_with_a_number_no_float_holds_is_exported_unreadable_not_infinity(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    """jsonb keeps a 400-digit decimal, which reads back as Infinity: the export wrote
    ``Infinity``, which no JSON reader takes. It is exported as unreadable data instead; the
    other events as they are."""
    event = await planted_event(engine, '{"n": ' + "9" * 400 + ".5}")
    exported = await invoke(cli_env, "audit", "export")
    assert exported.code == 0, exported.stderr
    assert "Infinity" not in exported.stdout
    records = [json.loads(line) for line in exported.stdout.splitlines()]
    [record] = [r for r in records if r["id"] == event]
    assert (record["data"], record["data_unreadable"]) == (None, True)
    assert all("data_unreadable" not in r for r in records if r["id"] != event)
    table = await invoke(cli_env, "audit", "export", "--format", "csv")
    assert table.code == 0, table.stderr
    assert "Infinity" not in table.stdout


async def test_pending_all_marks_a_shown_copy_it_cannot_read(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    """``pending list --all`` shows every request of any status: one whose shown copy cannot
    be read is printed with an explicit marker, and in JSON as ``"shown": null`` with
    ``"shown_unreadable": true``, never as ``{}`` (arguments it never had)."""
    bad = (await start_refund(engine)).pending[0]
    good = (await start_refund(engine, "refund 1002")).pending[0]
    await execute(
        engine, "update approval_requests set shown = %s::jsonb where id = %s", nested(5_000), bad
    )
    text = await invoke(cli_env, "pending", "list", "--all")
    assert text.code == 0, text.stderr
    lines = {line.split()[0]: line for line in text.stdout.splitlines()}
    assert "<unreadable: stored copy changed>" in lines[bad]
    assert "{}" not in lines[bad]
    assert "null" not in lines[bad]
    assert '"order_id": "1002"' in lines[good]
    assert "unreadable" not in lines[good]

    listed = await invoke(cli_env, "pending", "list", "--all", "--json")
    assert listed.code == 0, listed.stderr
    by_id = {r["id"]: r for r in listed.json()}
    assert by_id[bad]["shown"] is None
    assert by_id[bad]["shown_unreadable"] is True
    assert by_id[good]["shown"]["args"]["order_id"] == "1002"
    assert by_id[good]["shown_unreadable"] is False
    assert by_id[bad]["shown_changed"] is True
    assert by_id[good]["shown_changed"] is False


async def test_pending_all_marks_a_readable_shown_copy_that_was_changed(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    """A shown copy an insider rewrote to other arguments still reads back: ``pending list
    --all`` prints it after an explicit marker (JSON ``"shown_changed": true``), never as the
    copy the approver would have been shown, and records the tampering once however often it
    is listed. The inbox leaves it out."""
    changed = (await start_refund(engine)).pending[0]
    intact = (await start_refund(engine, "refund 1002")).pending[0]
    await execute(
        engine,
        "update approval_requests set shown = jsonb_set(shown, '{args,order_id}', '\"9999\"')"
        " where id = %s",
        changed,
    )
    for _ in range(2):
        text = await invoke(cli_env, "pending", "list", "--all")
        assert text.code == 0, text.stderr
    lines = {line.split()[0]: line for line in text.stdout.splitlines()}
    assert "<changed: not the copy recorded> {" in lines[changed]
    assert '"order_id": "9999"' in lines[changed]
    assert "<changed" not in lines[intact]

    listed = await invoke(cli_env, "pending", "list", "--all", "--json")
    by_id = {r["id"]: r for r in listed.json()}
    assert by_id[changed]["shown_changed"] is True
    assert by_id[changed]["shown_unreadable"] is False
    assert by_id[changed]["shown"]["args"]["order_id"] == "9999"
    assert by_id[intact]["shown_changed"] is False

    async with engine.connection() as conn:
        cursor = await conn.execute(
            "select request_id::text as request_id, principal from audit_events"
            " where kind = 'request.tampered'"
        )
        tampered = await cursor.fetchall()
    assert [r["request_id"] for r in tampered] == [changed]
    assert str(tampered[0]["principal"]).startswith("cli:")

    inbox = await invoke(cli_env, "pending", "list", "--json")
    assert [r["id"] for r in inbox.json()] == [intact]
