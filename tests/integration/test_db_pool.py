"""The test databases' pool (``tests/db_pool.py``) hands out only what a fresh copy of the
template holds: a used database comes back emptied, with the template's own rows; one whose
schema a test changed is dropped; and a connection left open is cut off, not carried over."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.db_pool import DatabasePool, with_database
from tests.integration.helpers import start_refund
from web.engine import open_engine
from web.settings import Settings


async def contents(url: str, pool: DatabasePool) -> dict[str, Any]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        counts = {}
        for table in pool.tables:
            query = sql.SQL("SELECT json_agg(t ORDER BY t::text) FROM {} t").format(sql.SQL(table))
            row = await (await conn.execute(query)).fetchone()
            counts[table] = row[0] if row else None
        seq = await (await conn.execute("SELECT nextval('audit_events_id_seq')")).fetchone()
        counts["audit_events_id_seq"] = seq[0] if seq else None
        # Every sequence where it stands (before a nextval, last_value is null), large objects.
        sequences = await (
            await conn.execute(
                "SELECT json_object_agg(schemaname || '.' || sequencename, last_value)"
                " FROM pg_sequences WHERE sequencename <> 'audit_events_id_seq'"
            )
        ).fetchone()
        counts["sequences"] = sequences[0] if sequences else None
    return counts


@pytest.fixture
async def other_role(admin_url: str) -> AsyncIterator[str]:
    """A role of the test's own to hand objects to: a fresh server has only its superuser, and
    a role some earlier session left behind (``root`` on one machine) proves nothing."""
    name = f"approvals_test_owner_{os.getpid()}"
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
        await admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))
        await admin.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(name)))
    yield name
    # The pool dropped the database it owned objects in; nothing else refers to the role.
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
        await admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


@pytest.fixture
async def own_pool(admin_url: str, template_db: str) -> Any:
    pool = DatabasePool(admin_url, template_db)
    await pool.open()
    yield pool
    await pool.close()


async def test_a_used_database_comes_back_as_a_fresh_copy(
    own_pool: DatabasePool, admin_url: str, tmp_path: Any
) -> None:
    fresh = await own_pool.take()
    expected = await contents(with_database(admin_url, fresh), own_pool)
    assert own_pool.seeds, "the template has rows of its own (migration versions, chain head)"

    url = with_database(admin_url, fresh)
    settings = Settings(database_url=url, data_dir=tmp_path, config_file=tmp_path / "none.toml")
    async with open_engine(url, settings) as engine:
        await start_refund(engine)
        await engine.audit.verify()
    straggler = await psycopg.AsyncConnection.connect(url, autocommit=True)
    used = await contents(url, own_pool)
    assert used != expected

    await own_pool.give_back(fresh)
    assert (own_pool.recycled, own_pool.dropped, own_pool.fingerprinted) == (1, 0, 1)
    [again] = own_pool.ready
    assert again != fresh  # renamed: the old name leads nowhere
    assert await contents(with_database(admin_url, again), own_pool) == expected
    with pytest.raises(psycopg.OperationalError):
        await straggler.execute("SELECT 1")
    with pytest.raises(psycopg.OperationalError):
        await psycopg.AsyncConnection.connect(url)
    await straggler.close()

    # And the emptied database works as a fresh one.
    reused = await own_pool.take()
    url = with_database(admin_url, reused)
    settings = Settings(database_url=url, data_dir=tmp_path, config_file=tmp_path / "none.toml")
    async with open_engine(url, settings) as engine:
        await start_refund(engine)
        assert (await engine.audit.verify()).ok
    # A test that wrote rows, not schema: recycled without reading the whole fingerprint.
    await own_pool.give_back(reused)
    assert (own_pool.recycled, own_pool.dropped, own_pool.fingerprinted) == (2, 0, 1)
    assert await contents(with_database(admin_url, own_pool.ready[0]), own_pool) == expected


SETTING = (
    "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET work_mem = %L', current_database(), '8MB');"
    " END $$"
)


@pytest.mark.parametrize(
    "change",
    [
        "CREATE TABLE leftover (x int)",
        "ALTER TABLE runs DISABLE TRIGGER runs_cancelled_is_final_v1",
        "CREATE OR REPLACE FUNCTION approvals_thread_lock_key_v1(thread_id text) RETURNS bigint"
        " LANGUAGE sql AS 'SELECT 1::bigint'",
        "GRANT SELECT ON runs TO PUBLIC",
        "CREATE INDEX extra ON runs (graph)",
        # The foreign keys' own (internal) triggers: their checks stop.
        "ALTER TABLE decisions DISABLE TRIGGER ALL",
        "ALTER TABLE runs FORCE ROW LEVEL SECURITY",
        "ALTER TABLE runs OWNER TO {other_role}",
        "ALTER TABLE runs REPLICA IDENTITY FULL",
        # Columns: ordering, identity, and what the planner and storage are told.
        'ALTER TABLE runs ALTER COLUMN graph TYPE text COLLATE "C"',
        "ALTER TABLE runs ALTER COLUMN graph SET STATISTICS 5",
        "ALTER TABLE runs ALTER COLUMN graph SET (n_distinct = 5)",
        "ALTER TABLE runs ALTER COLUMN graph SET STORAGE EXTERNAL",
        "ALTER TABLE runs ALTER COLUMN graph SET COMPRESSION pglz",
        "ALTER TABLE run_events ALTER COLUMN id DROP DEFAULT;"
        " ALTER TABLE run_events ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY",
        "ALTER SEQUENCE run_events_id_seq CACHE 10",
        "ALTER SEQUENCE run_events_id_seq AS integer",
        # Objects of the database outside any user schema, or not in pg_class or pg_proc.
        "CREATE FUNCTION pg_catalog.approvals_leak(uuid) RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "CREATE FUNCTION pg_catalog.approvals_leak() RETURNS event_trigger LANGUAGE plpgsql"
        " AS 'BEGIN RAISE EXCEPTION ''no DDL''; END';"
        " CREATE EVENT TRIGGER leak ON ddl_command_start EXECUTE FUNCTION approvals_leak()",
        "ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO PUBLIC",
        "CREATE PUBLICATION leak FOR ALL TABLES",
        "CREATE CAST (text AS uuid) WITH INOUT AS IMPLICIT",
        "CREATE OPERATOR public.=== (LEFTARG = text, RIGHTARG = text, FUNCTION = texteq)",
        'CREATE COLLATION leak FROM "C"',
        "CREATE TEXT SEARCH CONFIGURATION leak (COPY = simple)",
        "CREATE FOREIGN DATA WRAPPER leak",
        "CREATE STATISTICS leak ON graph, status FROM runs",
        "COMMENT ON TABLE runs IS 'leak'",
        "SELECT lo_from_bytea(0, 'leak')",
        "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I OWNER TO {other_role}', current_database());"
        " END $$",
        "DO $$ BEGIN EXECUTE format('COMMENT ON DATABASE %I IS %L', current_database(), 'x');"
        " END $$",
        SETTING,
        "CREATE TABLE information_schema.leftover (x int)",
    ],
)
async def test_a_database_whose_schema_changed_is_dropped(
    own_pool: DatabasePool, admin_url: str, other_role: str, change: str
) -> None:
    name = await own_pool.take()
    async with await psycopg.AsyncConnection.connect(
        with_database(admin_url, name), autocommit=True
    ) as conn:
        await conn.execute(change.replace("{other_role}", other_role))
    await own_pool.give_back(name)
    assert (own_pool.recycled, own_pool.dropped, own_pool.ready) == (0, 1, [])
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
        left = await (
            await admin.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (name,))
        ).fetchone()
    assert left == (0,)


@pytest.mark.parametrize(
    "change",
    [
        "CREATE TABLE leftover (x int)",
        "ALTER TABLE runs REPLICA IDENTITY FULL",
        "GRANT SELECT ON runs TO PUBLIC",
        "ALTER TABLE runs ALTER COLUMN graph SET STATISTICS 5",
        "COMMENT ON TABLE runs IS 'leak'",
        "SELECT lo_from_bytea(0, 'leak')",
        "CREATE FUNCTION pg_catalog.approvals_leak(uuid) RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I OWNER TO {other_role}', current_database());"
        " END $$",
        "DO $$ BEGIN EXECUTE format('COMMENT ON DATABASE %I IS %L', current_database(), 'x');"
        " END $$",
        SETTING,
    ],
)
async def test_a_recycled_database_whose_schema_changed_is_dropped(
    own_pool: DatabasePool, admin_url: str, other_role: str, change: str
) -> None:
    """A database recycled before is fingerprinted again only when its catalogs were written,
    or what the shared catalogs say of it changed: one change of each kind still drops it."""
    await own_pool.give_back(await own_pool.take())
    [name] = own_pool.ready
    assert await own_pool.take() == name
    async with await psycopg.AsyncConnection.connect(
        with_database(admin_url, name), autocommit=True
    ) as conn:
        await conn.execute(change.replace("{other_role}", other_role))
    await own_pool.give_back(name)
    assert (own_pool.recycled, own_pool.dropped, own_pool.ready) == (1, 1, [])
    assert own_pool.fingerprinted == 2


PLANNER_VIEW = """
SELECT json_build_object(
    'relations', (SELECT json_object_agg(c.oid::regclass::text,
                                         json_build_array(c.reltuples, c.relpages, c.relallvisible))
                    FROM pg_class c WHERE c.oid >= 16384 AND c.relkind IN ('r', 'p', 'i', 'm')),
    'statistics', (SELECT count(*) FROM pg_statistic WHERE starelid >= 16384))
"""

BULK = (
    "INSERT INTO demo_side_effects (run_id, call_id, tool, args)"
    " SELECT gen_random_uuid(), g::text, 'refund', jsonb_build_object('order', g)"
    " FROM generate_series(1, %s) g"
)


async def planner_view(url: str) -> Any:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        row = await (await conn.execute(PLANNER_VIEW)).fetchone()
    assert row is not None
    return row[0]


async def test_what_the_planner_was_told_about_a_tests_rows_does_not_outlive_it(
    own_pool: DatabasePool, admin_url: str
) -> None:
    """A test that loads rows and analyzes them (as the plan-shape tests do) leaves the
    column statistics and the row and page counts of its rows behind, which the next test's
    plans would be made from: a recycled database tells the planner what a fresh copy does."""
    name = await own_pool.take()
    url = with_database(admin_url, name)
    expected = await planner_view(url)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(BULK, (2000,))
        await conn.execute("VACUUM ANALYZE demo_side_effects")
    assert await planner_view(url) != expected
    await own_pool.give_back(name)
    assert (own_pool.recycled, own_pool.dropped) == (1, 0)
    assert await planner_view(with_database(admin_url, own_pool.ready[0])) == expected


async def test_a_database_grown_past_its_bound_is_dropped(
    own_pool: DatabasePool, admin_url: str
) -> None:
    """The deleted rows' pages stay (until a vacuum truncates them), and the planner scales its
    estimates by a table's pages: a database that grew more than ``max_growth`` past the
    template (a bulk load) is dropped, not handed on with the dead pages of its load."""
    own_pool.max_growth = 1 << 20
    name = await own_pool.take()
    async with await psycopg.AsyncConnection.connect(
        with_database(admin_url, name), autocommit=True
    ) as conn:
        await conn.execute(BULK, (20000,))
    await own_pool.give_back(name)
    assert (own_pool.recycled, own_pool.dropped, own_pool.ready) == (0, 1, [])


async def test_a_lock_a_straggler_held_is_not_handed_on(
    own_pool: DatabasePool, admin_url: str
) -> None:
    """Advisory locks are the database's (its oid, which a rename keeps): one a test's
    connection still holds at its end goes with that connection, cut off by the recycle."""
    name = await own_pool.take()
    straggler = await psycopg.AsyncConnection.connect(
        with_database(admin_url, name), autocommit=True
    )
    await straggler.execute("SELECT pg_advisory_lock(7277)")
    await straggler.execute("BEGIN")
    await straggler.execute("SELECT pg_advisory_xact_lock(7278)")
    await own_pool.give_back(name)
    assert own_pool.recycled == 1
    async with await psycopg.AsyncConnection.connect(
        with_database(admin_url, own_pool.ready[0]), autocommit=True
    ) as conn:
        row = await (
            await conn.execute("SELECT pg_try_advisory_lock(7277), pg_try_advisory_lock(7278)")
        ).fetchone()
    assert row == (True, True)
    await straggler.close()
