"""More runs starting at once than the pool has connections all start: a starting run holds a
connection for its thread's lock and needs more while its step runs, so with every connection
held by a start each waited for another for ever (a burst of POST /api/v1/runs hung a server)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from approvals.principals import Principal, Via
from web.engine import open_engine
from web.settings import Settings


async def test_a_burst_of_starts_larger_than_the_pool_all_pause(
    database_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        database_url=database_url,
        data_dir=tmp_path,
        config_file=tmp_path / "none.toml",
        pool_max_size=6,
        worker_concurrency=2,
    )
    shop = Principal(id="local:shop", name="shop", groups=frozenset({"support"}), via=Via.PASSWORD)
    async with open_engine(database_url, settings) as engine:
        starts = [
            engine.start_run("refund", {"message": f"refund 100{1 + i % 2}"}, principal=shop)
            for i in range(12)
        ]
        # A liveness bound, not a timing: without the cap this never ends.
        outcomes = await asyncio.wait_for(asyncio.gather(*starts), 120)
    assert [o.status for o in outcomes] == ["waiting"] * 12
