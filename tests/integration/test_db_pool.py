"""The test databases' pool (``tests/db_pool.py``) hands out only what a fresh copy of the
template holds: a used database comes back emptied, with the template's own rows; one whose
schema a test changed is dropped; and a connection left open is cut off, not carried over."""

from __future__ import annotations

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
    return counts


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
    assert (own_pool.recycled, own_pool.dropped) == (1, 0)
    [again] = own_pool.ready
    assert again != fresh  # renamed: the old name leads nowhere
    assert await contents(with_database(admin_url, again), own_pool) == expected
    with pytest.raises(psycopg.OperationalError):
        await straggler.execute("SELECT 1")
    with pytest.raises(psycopg.OperationalError):
        await psycopg.AsyncConnection.connect(url)
    await straggler.close()

    # And the emptied database works as a fresh one.
    url = with_database(admin_url, await own_pool.take())
    settings = Settings(database_url=url, data_dir=tmp_path, config_file=tmp_path / "none.toml")
    async with open_engine(url, settings) as engine:
        await start_refund(engine)
        assert (await engine.audit.verify()).ok


@pytest.mark.parametrize(
    "change",
    [
        "CREATE TABLE leftover (x int)",
        "ALTER TABLE runs DISABLE TRIGGER runs_cancelled_is_final_v1",
        "CREATE OR REPLACE FUNCTION approvals_thread_lock_key_v1(thread_id text) RETURNS bigint"
        " LANGUAGE sql AS 'SELECT 1::bigint'",
        "GRANT SELECT ON runs TO PUBLIC",
        "CREATE INDEX extra ON runs (graph)",
    ],
)
async def test_a_database_whose_schema_changed_is_dropped(
    own_pool: DatabasePool, admin_url: str, change: str
) -> None:
    name = await own_pool.take()
    async with await psycopg.AsyncConnection.connect(
        with_database(admin_url, name), autocommit=True
    ) as conn:
        await conn.execute(change)
    await own_pool.give_back(name)
    assert (own_pool.recycled, own_pool.dropped, own_pool.ready) == (0, 1, [])
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
        left = await (
            await admin.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (name,))
        ).fetchone()
    assert left == (0,)
