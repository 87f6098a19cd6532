"""The decision log is append-only and hash-chained, and tampering is named by a command.

Tampering is done the only way it can be: as the superuser, with triggers off for the session
(``session_replication_role = replica``), straight on this test's database.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from approvals.audit import ChainedEvent, chain_hash, format_at
from tests.integration.helpers import scalar
from tests.integration.inprocess import invoke
from web.engine import Engine

KINDS_OF_A_REFUND = {
    "run.started",
    "tool.started",
    "tool.succeeded",
    "request.created",
    "run.waiting",
    "request.decided",
    "resume.queued",
    "resume.started",
    "policy.deny",
    "run.completed",
    "resume.finished",
}


async def refund_flow(engine: Engine) -> str:
    """The demo's refund agent: two refunds asked, one approved, one rejected, resumed."""
    out = await engine.runner.start(
        "refund", {"message": "refund 1001 and 1002"}, principal="alice"
    )
    assert out.status == "waiting"
    approve, reject = out.pending
    await engine.decide_as_operator(approve, "approve", principal="bob")
    await engine.decide_as_operator(reject, "reject", principal="rob", reason="duplicate")
    await engine.worker.drain()
    finished = await engine.runs.get(out.run_id)
    assert finished is not None
    assert finished.status == "completed"
    return str(out.run_id)


async def tamper(database_url: str, statement: str, *params: Any) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("SET session_replication_role = replica")
        await conn.execute(statement, params)


async def stored_events(database_url: str) -> list[dict[str, Any]]:
    async with await psycopg.AsyncConnection.connect(database_url, row_factory=dict_row) as conn:
        cursor = await conn.execute(
            "SELECT *, data::text AS data_text FROM audit_events ORDER BY id"
        )
        return await cursor.fetchall()


async def test_normal_use_builds_a_chain_the_verifier_recomputes(
    engine: Engine, database_url: str
) -> None:
    run_id = await refund_flow(engine)
    events = await engine.audit.for_run(run_id)
    assert {e["kind"] for e in events} >= KINDS_OF_A_REFUND
    # The database's trigger and the Python verifier hash every real row alike.
    rows = await stored_events(database_url)
    for before, row in zip([None, *rows], rows, strict=False):
        event = ChainedEvent.from_row(row)
        assert row["prev_hash"] == (before["hash"] if before else "0" * 64)
        assert chain_hash(row["prev_hash"], event) == row["hash"], row["kind"]
    assert [r["id"] for r in rows] == list(range(1, len(rows) + 1))
    verified = await engine.audit.verify()
    assert verified.ok, verified.finding
    assert (verified.events, verified.head) == (len(rows), rows[-1]["hash"])


async def test_each_event_carries_its_ids_and_no_arguments(engine: Engine) -> None:
    run_id = await refund_flow(engine)
    events = {e["kind"]: e for e in await engine.audit.for_run(run_id)}
    decided = events["request.decided"]
    assert decided["principal"] in {"bob", "rob"}
    assert decided["request_id"] is not None
    assert decided["call_id"].startswith("refund-")
    assert decided["tool"] == "issue_refund"
    assert decided["state_version"]
    assert decided["data"]["identity"].startswith("jcs-sha256:")
    for kind in ("resume.queued", "resume.started", "resume.finished"):
        assert events[kind]["request_id"] is not None, kind
    denied = events["policy.deny"]
    assert {"point", "reason", "interceptor", "enforced_identity"} <= set(denied["data"])
    # The log holds identities, never the arguments themselves (amounts, customers, reasons).
    everything = json.dumps([e["data"] for e in await engine.audit.for_run(run_id)])
    assert "customer request" not in everything
    assert "ada@example.com" not in everything
    assert '"amount"' not in everything


async def test_the_database_refuses_update_delete_and_truncate(engine: Engine) -> None:
    await refund_flow(engine)
    async with engine.connection() as conn:
        for statement in (
            "UPDATE audit_events SET principal = 'mallory' WHERE kind = 'request.decided'",
            "DELETE FROM audit_events WHERE kind = 'request.decided'",
            "TRUNCATE audit_events",
            "UPDATE audit_chain_head SET last_id = 1",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
                await conn.execute(statement)
    assert (
        await scalar(engine, "select count(*) from audit_events where principal = 'mallory'") == 0
    )
    assert (await engine.audit.verify()).ok


async def test_an_untouched_log_verifies_on_the_command_line(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    await refund_flow(engine)
    result = await invoke(cli_env, "audit", "verify")
    assert result.code == 0, result.stderr
    count = await scalar(engine, "select count(*) from audit_events")
    head = await scalar(engine, "select hash from audit_events order by id desc limit 1")
    assert result.stdout.strip() == f"audit log verified: {count} events, head {head}"
    as_json = (await invoke(cli_env, "audit", "verify", "--json")).json()
    assert as_json == {"ok": True, "events": count, "last_id": count, "head": head, "finding": None}


Tampering = Callable[[Engine, str], Awaitable[int]]


async def change_a_decision(engine: Engine, url: str) -> int:
    target = await scalar(engine, "select min(id) from audit_events where kind = 'request.decided'")
    await tamper(url, "UPDATE audit_events SET principal = 'mallory' WHERE id = %s", target)
    return int(target)


async def change_and_rehash_a_decision(engine: Engine, url: str) -> int:
    target = await scalar(engine, "select min(id) from audit_events where kind = 'request.decided'")
    row = next(r for r in await stored_events(url) if r["id"] == target)
    forged = ChainedEvent.from_row({**row, "data_text": '{"decision": "approve"}'})
    await tamper(
        url,
        "UPDATE audit_events SET data = %s::jsonb, hash = %s WHERE id = %s",
        forged.data_text,
        chain_hash(forged.prev_hash, forged),
        target,
    )
    return int(target)


async def delete_a_decision(engine: Engine, url: str) -> int:
    target = await scalar(engine, "select min(id) from audit_events where kind = 'request.decided'")
    await tamper(url, "DELETE FROM audit_events WHERE id = %s", target)
    return int(target)


async def insert_a_decision(engine: Engine, url: str) -> int:
    last = (await stored_events(url))[-1]
    forged = ChainedEvent(
        id=last["id"] + 1,
        at=datetime.now(UTC),
        kind="request.decided",
        principal="mallory",
        data_text='{"decision": "approve"}',
        prev_hash=last["hash"],
    )
    await tamper(
        url,
        "INSERT INTO audit_events (id, at, kind, principal, data, prev_hash, hash)"
        " VALUES (%s, %s, %s, %s, %s::jsonb, %s, %s)",
        forged.id,
        forged.at,
        forged.kind,
        forged.principal,
        forged.data_text,
        forged.prev_hash,
        chain_hash(forged.prev_hash, forged),
    )
    return forged.id


@pytest.mark.slow
@pytest.mark.parametrize(
    ("tampering", "named"),
    [
        (change_a_decision, "was changed"),
        (change_and_rehash_a_decision, "was changed"),
        (delete_a_decision, "is missing (removed)"),
        (insert_a_decision, "was inserted"),
    ],
)
async def test_tampering_is_named_by_audit_verify(
    engine: Engine, cli_env: dict[str, str], tampering: Tampering, named: str
) -> None:
    await refund_flow(engine)
    assert (await invoke(cli_env, "audit", "verify")).code == 0
    event_id = await tampering(engine, cli_env["APPROVALS_DATABASE_URL"])
    result = await invoke(cli_env, "audit", "verify")
    assert result.code == 1
    assert result.stdout == ""
    assert f"event {event_id} {named}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    as_json = await invoke(cli_env, "audit", "verify", "--json")
    assert as_json.code == 1
    assert as_json.json()["finding"]["event_id"] == event_id


async def test_a_removed_last_event_is_named(engine: Engine, cli_env: dict[str, str]) -> None:
    await refund_flow(engine)
    last = await scalar(engine, "select max(id) from audit_events")
    await tamper(cli_env["APPROVALS_DATABASE_URL"], "DELETE FROM audit_events WHERE id = %s", last)
    result = await invoke(cli_env, "audit", "verify")
    assert result.code == 1
    assert f"event {last} is missing (removed)" in result.stderr


@pytest.mark.slow
async def test_export_in_both_formats(engine: Engine, cli_env: dict[str, str]) -> None:
    run_id = await refund_flow(engine)
    other = await engine.runner.start("refund", {"message": "refund 1001"}, principal="carol")
    rows = await stored_events(cli_env["APPROVALS_DATABASE_URL"])

    jsonl = await invoke(cli_env, "audit", "export")
    assert jsonl.code == 0, jsonl.stderr
    exported = [json.loads(line) for line in jsonl.stdout.splitlines()]
    assert [e["id"] for e in exported] == [r["id"] for r in rows]
    first = exported[0]
    assert set(first) == {
        "id",
        "at",
        "kind",
        "run_id",
        "request_id",
        "call_id",
        "tool",
        "principal",
        "state_version",
        "data",
        "prev_hash",
        "hash",
    }
    assert first["at"] == format_at(rows[0]["at"])
    assert first["hash"] == rows[0]["hash"]

    table = await invoke(cli_env, "audit", "export", "--format", "csv", "--run", run_id)
    assert table.code == 0, table.stderr
    read = list(csv.DictReader(io.StringIO(table.stdout)))
    assert read
    assert {r["run_id"] for r in read} == {run_id}
    assert [int(r["id"]) for r in read] == [r["id"] for r in rows if str(r["run_id"]) == run_id]
    decided = next(r for r in read if r["kind"] == "request.decided")
    assert json.loads(decided["data"])["decision"] in {"approve", "reject"}

    boundary = next(r["at"] for r in rows if str(r["run_id"]) == str(other.run_id))
    since = await invoke(cli_env, "audit", "export", "--since", boundary.isoformat())
    assert {json.loads(line)["run_id"] for line in since.stdout.splitlines()} == {str(other.run_id)}
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert (await invoke(cli_env, "audit", "export", "--since", future)).stdout == ""

    bad = await invoke(cli_env, "audit", "export", "--since", "yesterday")
    assert bad.code == 2
    assert bad.stderr.startswith("error: --since")
    assert (await invoke(cli_env, "audit", "export", "--run", "nope")).code == 2
