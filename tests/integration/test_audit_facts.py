"""An audit event that states a decision, a vote or a tool execution is refused at insert unless
the stored fact it describes backs it (migration 0027), even from the runtime role, which may
INSERT into the log: the chain proves order and integrity, this that the event happened.

Each test makes its own runtime role through ``approvals db grant``'s code path and drops it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from storage.roles import grant_runtime
from tests.integration.governed_graphs import GRAPHS
from tests.integration.test_audit import refund_flow
from tests.integration.test_runtime_role import as_role, owner_says
from web.engine import Engine, open_engine
from web.settings import Settings


@pytest_asyncio.fixture(loop_scope="session")
async def runtime_url(admin_url: str, database_url: str) -> AsyncIterator[str]:
    """The test's database as a fresh runtime role, granted as `approvals db grant` grants."""
    role = f"approvals_rt_{uuid.uuid4().hex[:10]}"
    await owner_says(admin_url, f"CREATE ROLE {role} LOGIN")
    try:
        await grant_runtime(database_url, role)
        yield as_role(database_url, role)
    finally:
        await owner_says(database_url, f"DROP OWNED BY {role}")
        await owner_says(admin_url, f"DROP ROLE {role}")


@pytest_asyncio.fixture(loop_scope="session")
async def runtime(runtime_url: str, tmp_path: Path) -> AsyncIterator[Engine]:
    settings = Settings(
        database_url=runtime_url,
        data_dir=tmp_path,
        config_file=tmp_path / "none.toml",
        graphs={"quorum": GRAPHS["quorum"]},
    )
    async with open_engine(runtime_url, settings) as engine:
        yield engine


async def rows(url: str, query: str, *params: Any) -> list[dict[str, Any]]:
    async with await psycopg.AsyncConnection.connect(url, row_factory=dict_row) as conn:
        return await (await conn.execute(query, params)).fetchall()


async def insert_event(url: str, event: dict[str, Any]) -> None:
    """One event, inserted as it would be by hand (``data`` as jsonb)."""
    columns = ", ".join(event)
    marks = ", ".join(["%s"] * len(event))
    values = [Jsonb(v) if k == "data" else v for k, v in event.items()]
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        insert = f"INSERT INTO audit_events ({columns}) VALUES ({marks})"  # noqa: S608 (our keys)
        await conn.execute(insert, values)


async def refused(url: str, event: dict[str, Any]) -> bool:
    """Whether the log refuses ``event`` as unfounded (any other error is raised)."""
    try:
        await insert_event(url, event)
    except psycopg.errors.CheckViolation:
        return True
    return False


def forged(row: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of a stored event's describing columns (not its id, time or chain), changed."""
    event = {
        k: row[k]
        for k in ("kind", "run_id", "request_id", "call_id", "tool", "state_version", "principal")
    }
    event["data"] = row["data"]
    return event | changes


async def test_the_real_paths_write_their_events_and_the_chain_verifies(
    runtime: Engine, runtime_url: str
) -> None:
    run_id = await refund_flow(runtime)  # two decisions, a tool run, the resume
    out = await runtime.runner.start("quorum", {"message": "refund 1001"}, principal="local:shop")
    await runtime.decide_as_operator(out.pending[0], "approve", principal="local:ann")
    await runtime.decide_as_operator(out.pending[0], "approve", principal="local:bob")
    await runtime.worker.drain()
    kinds = {
        r["kind"]
        for r in await rows(
            runtime_url,
            "SELECT kind FROM audit_events WHERE run_id = ANY(%s)",
            [uuid.UUID(run_id), uuid.UUID(str(out.run_id))],
        )
    }
    assert {
        "request.decided",
        "request.voted",
        "resume.queued",
        "tool.started",
        "tool.succeeded",
    } <= kinds
    assert (await runtime.audit.verify()).ok


async def test_a_forged_decision_vote_or_execution_is_refused_at_insert(
    runtime: Engine, runtime_url: str
) -> None:
    run_id = await refund_flow(runtime)
    out = await runtime.runner.start(
        "refund", {"message": "refund 1001 and 1002"}, principal="alice"
    )
    pending = out.pending[0]
    events = await rows(
        runtime_url, "SELECT * FROM audit_events WHERE run_id = %s ORDER BY id", uuid.UUID(run_id)
    )
    by_kind = {e["kind"]: e for e in events}
    created = (
        await rows(
            runtime_url,
            "SELECT * FROM audit_events WHERE request_id = %s AND kind = 'request.created'",
            uuid.UUID(pending),
        )
    )[0]
    decided = by_kind["request.decided"]
    attempts = {
        # The issue's own: the CEO "approved" a request nobody decided.
        "decision nobody made": forged(
            created,
            kind="request.decided",
            principal="local:ceo",
            data={
                "decision": "approve",
                "reason": None,
                "identity": created["data"]["identity"],
                "args_identity": None,
            },
        ),
        "another principal's name on a real decision": forged(decided, principal="local:ceo"),
        "a real decision stated twice": forged(decided),
        "a decision of another kind": forged(
            decided, data=decided["data"] | {"decision": "reject"}
        ),
        "a vote nobody cast": forged(
            created,
            kind="request.voted",
            principal="local:ceo",
            state_version=None,
            data={"approvals": 1, "person": "local:ceo"},
        ),
        "a job nobody queued": forged(
            by_kind["resume.queued"], request_id=uuid.UUID(pending), data={"job": 999999}
        ),
        "an execution that never started": forged(by_kind["tool.started"], call_id="never-called"),
        "an execution that ended otherwise": forged(
            by_kind["tool.succeeded"], kind="tool.failed", data={"error": "boom"}
        ),
        "an execution ended twice": forged(by_kind["tool.succeeded"]),
        "a reconciliation of an outcome that was known": forged(
            by_kind["tool.succeeded"],
            kind="tool.reconciled",
            tool=None,
            data={"status": "succeeded", "error": None},
        ),
    }
    before = await rows(runtime_url, "SELECT last_id FROM audit_chain_head")
    accepted = [what for what, event in attempts.items() if not await refused(runtime_url, event)]
    assert accepted == []
    with pytest.raises(psycopg.errors.CheckViolation, match="no stored fact backs"):
        await insert_event(runtime_url, attempts["decision nobody made"])
    assert await rows(runtime_url, "SELECT last_id FROM audit_chain_head") == before
    # Events the trigger does not bind still go in, and the chain holds.
    await insert_event(runtime_url, {"kind": "probe"})
    assert (await runtime.audit.verify()).ok
