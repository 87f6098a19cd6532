"""Runtime processes connect as a role that owns nothing: after ``approvals db grant ROLE`` it
runs the engine's normal work, and cannot disable the log's triggers, change or remove its
events, or move its head except by appending.

Each test creates its own LOGIN role (the server trusts local connections) and drops it after.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import pytest_asyncio

from approvals.audit import GENESIS
from storage.migrate import upgrade
from tests.integration.inprocess import invoke
from tests.integration.test_audit import refund_flow
from web.engine import open_engine
from web.settings import Settings


def as_role(url: str, role: str) -> str:
    """The same server and database, connected as ``role`` (host and port, or the embedded
    server's socket query, kept as they are)."""
    parts = urlsplit(url)
    where = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{role}@{where}"))


async def owner_says(url: str, statement: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(statement)


@pytest_asyncio.fixture(loop_scope="session")
async def role(admin_url: str, database_url: str) -> AsyncIterator[str]:
    name = f"approvals_rt_{uuid.uuid4().hex[:10]}"
    await owner_says(admin_url, f"CREATE ROLE {name} LOGIN")
    yield name
    # Its privileges first (in this test's database), or the role cannot be dropped.
    await owner_says(database_url, f"DROP OWNED BY {name}")
    await owner_says(admin_url, f"DROP ROLE {name}")


@pytest.fixture
def env(database_url: str, role: str, tmp_path: Path) -> dict[str, str]:
    """Serve, workers and the CLI as the runtime role; migrations and grants as the owner."""
    return {
        "APPROVALS_DATABASE_URL": as_role(database_url, role),
        "APPROVALS_MIGRATION_DATABASE_URL": database_url,
        "APPROVALS_DATA_DIR": str(tmp_path / "data"),
        "APPROVALS_CONFIG_FILE": str(tmp_path / "none.toml"),
        "APPROVALS_EXAMPLES": "true",
    }


async def privileges(database_url: str, role: str, table: str) -> set[str]:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(
            "SELECT p FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE',"
            " 'REFERENCES', 'TRIGGER']) p WHERE has_table_privilege(%s, %s, p)",
            (role, table),
        )
        return {r[0] for r in await cursor.fetchall()}


TAMPERING = [
    "ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only_v1",
    "ALTER TABLE audit_chain_head DISABLE TRIGGER audit_chain_head_guard_v1",
    "SET session_replication_role = replica",
    "UPDATE audit_events SET principal = 'mallory' WHERE kind = 'request.decided'",
    "DELETE FROM audit_events WHERE kind = 'request.decided'",
    "TRUNCATE audit_events",
    "UPDATE audit_chain_head SET last_id = 1",
    "INSERT INTO audit_chain_head (singleton, last_id, hash, legacy_until) VALUES (true, 0, '', 0)",
    "DROP TABLE audit_events CASCADE",
    "SELECT approvals_grant_runtime_v1(current_user)",
]


async def test_the_runtime_role_runs_the_engine_but_cannot_rewrite_the_log(
    database_url: str, role: str, env: dict[str, str], settings: Settings
) -> None:
    granted = await invoke(env, "db", "grant", role, "--json")
    assert granted.code == 0, granted.stderr
    held = {g["object"]: g["privileges"] for g in granted.json()["grants"]}
    assert held["table audit_events"] == "SELECT, INSERT"
    assert held["table audit_chain_head"] == "SELECT"
    assert held["table checkpoints"] == "SELECT, INSERT, UPDATE, DELETE"
    assert await privileges(database_url, role, "audit_events") == {"SELECT", "INSERT"}
    assert await privileges(database_url, role, "audit_chain_head") == {"SELECT"}

    runtime = env["APPROVALS_DATABASE_URL"]
    # Serve migrates at start-up; at head that only reads, which the runtime role may (and it
    # does not try to grant itself anything).
    await upgrade(runtime, runtime_role=role)
    async with open_engine(runtime, settings.model_copy(update={"database_url": runtime})) as e:
        await refund_flow(e)  # start, decide twice, resume on the worker, completed
        assert (await e.audit.verify()).ok

    async with await psycopg.AsyncConnection.connect(runtime, autocommit=True) as conn:
        for statement in TAMPERING:
            with pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
                await conn.execute(statement)
            # Refused for want of a privilege, not only by the triggers it could turn off.
            assert "append-only" not in str(refused.value), statement
        # A temporary table cannot stand in for the head: the chain trigger's search_path is
        # pinned, so the next event still links to the real head.
        await conn.execute("CREATE TEMP TABLE audit_chain_head (LIKE public.audit_chain_head)")
        await conn.execute(
            "INSERT INTO pg_temp.audit_chain_head VALUES (true, 0, %s, 0)", (GENESIS,)
        )
        await conn.execute("INSERT INTO audit_events (kind) VALUES ('probe')")
    async with open_engine(database_url, settings) as owner:
        verified = await owner.audit.verify()
        assert verified.ok, verified.finding
        assert verified.events > 1


@pytest.mark.parametrize(
    ("who", "message"),
    [
        ("nobody_{n}", "does not exist"),
        ("postgres", "superuser"),
        ("member", "is, or is a member of, postgres, the owner of table"),
    ],
)
async def test_db_grant_refuses_a_role_that_could_alter_what_it_gets(
    admin_url: str, role: str, env: dict[str, str], who: str, message: str
) -> None:
    name = {"member": role}.get(who, who.format(n=uuid.uuid4().hex[:6]))
    if who == "member":
        await owner_says(admin_url, f"GRANT postgres TO {role}")
    try:
        refused = await invoke(env, "db", "grant", name)
    finally:
        await owner_says(admin_url, f"REVOKE postgres FROM {role}")
    assert refused.code == 2, refused.stderr
    assert message in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


async def test_db_grant_needs_the_owners_url(role: str, env: dict[str, str]) -> None:
    as_runtime = env | {"APPROVALS_MIGRATION_DATABASE_URL": env["APPROVALS_DATABASE_URL"]}
    refused = await invoke(as_runtime, "db", "grant", role)
    assert refused.code == 1
    assert "run it with the owner's URL" in refused.stderr


async def test_db_upgrade_grants_the_runtime_role_again(
    database_url: str, role: str, env: dict[str, str]
) -> None:
    await owner_says(database_url, f"GRANT UPDATE, DELETE ON audit_events TO {role}")
    upgraded = await invoke(env | {"APPROVALS_RUNTIME_ROLE": role}, "db", "upgrade")
    assert upgraded.code == 0, upgraded.stderr
    # From nothing: what an earlier grant (or a hand) gave beyond the engine's needs is gone.
    assert await privileges(database_url, role, "audit_events") == {"SELECT", "INSERT"}
    assert await privileges(database_url, role, "runs") == {"SELECT", "INSERT", "UPDATE", "DELETE"}
