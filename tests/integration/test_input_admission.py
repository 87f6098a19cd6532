"""A new message is governed before the graph sees it: a denied input is in no checkpoint of its
thread (nor in the run's row), a masked one only masked, and the run's records keep the
AGENT-HOOKS order (startup, input, model calls...) in one session and one sequence."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.integration import call_id_graphs, governed_graphs
from web.engine import Engine, open_engine
from web.settings import Settings

CHECKPOINT_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


@pytest.fixture
async def governed(database_url: str, tmp_path: Path) -> AsyncIterator[Engine]:
    graphs = {**call_id_graphs.GRAPHS, **governed_graphs.GRAPHS}
    settings = Settings(
        database_url=database_url, config_file=tmp_path / "none.toml", graphs=graphs
    )
    async with open_engine(database_url, settings) as engine:
        yield engine


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return orjson.dumps(value, default=str)


async def stored(engine: Engine, thread_id: str) -> tuple[int, bytes]:
    """Every row LangGraph's saver holds for the thread (checkpoints, channel blobs, pending
    writes), raw: how many, and all their bytes as one string to search."""
    rows: list[dict[str, Any]] = []
    async with engine.connection() as conn:
        for table in CHECKPOINT_TABLES:
            cursor = await conn.execute(
                f"select * from {table} where thread_id = %s",  # noqa: S608 (fixed names)
                (thread_id,),
            )
            rows.extend(await cursor.fetchall())
    return len(rows), b"\n".join(_as_bytes(v) for row in rows for v in row.values())


async def run_row(engine: Engine, run_id: str) -> bytes:
    async with engine.connection() as conn:
        cursor = await conn.execute("select * from runs where id = %s", (run_id,))
        row = await cursor.fetchone()
    assert row is not None
    return _as_bytes(row)


async def points(engine: Engine, run_id: str) -> list[tuple[str, str]]:
    rows = await engine.audit.interceptions(run_id)
    sequences = [r["sequence"] for r in rows]
    assert sequences == sorted(set(sequences)), sequences
    assert {r["session_id"] for r in rows} == {run_id}
    return [(r["point"], r["decision"]) for r in rows]


async def test_a_denied_input_is_in_no_checkpoint_of_its_thread(governed: Engine) -> None:
    earlier = await governed.runner.start(
        "mask_input", {"message": "an earlier plugh question"}, principal="ann"
    )
    assert earlier.status == "completed", earlier
    thread = earlier.thread_id
    before, text = await stored(governed, thread)
    # The search sees what the saver stores: the earlier message is there.
    assert before > 0
    assert b"plugh" in text

    out = await governed.runner.start(
        "mask_input", {"message": "the forbidden xyzzy plan"}, principal="ann", thread_id=thread
    )
    assert out.status == "blocked"
    assert out.error == "blocked at input: that is not asked here"
    after, text = await stored(governed, thread)
    assert after == before
    assert b"xyzzy" not in text
    assert b"xyzzy" not in await run_row(governed, out.run_id)
    assert await points(governed, out.run_id) == [
        ("agent_startup", "allow"),
        ("input", "deny"),
        ("agent_shutdown", "allow"),
    ]


async def test_a_masked_input_is_in_no_checkpoint_unmasked(governed: Engine) -> None:
    out = await governed.runner.start(
        "mask_input", {"message": "pay with 4111-1111-1111-1111 please"}, principal="ann"
    )
    assert out.status == "completed", out
    assert out.answer == '{"heard": "pay with [card] please"}'
    count, text = await stored(governed, out.thread_id)
    assert count > 0
    assert b"[card]" in text
    assert b"4111-1111-1111-1111" not in text
    assert b"4111-1111-1111-1111" not in await run_row(governed, out.run_id)
    assert await points(governed, out.run_id) == [
        ("agent_startup", "allow"),
        ("input", "transform"),
        ("pre_model_call", "allow"),
        ("post_model_call", "allow"),
        ("output", "allow"),
        ("agent_shutdown", "allow"),
    ]


async def test_an_input_sent_to_a_human_waits_in_the_graph_and_starts_up_once(
    governed: Engine,
) -> None:
    # Only a graph can pause: an input a human must read is governed by its start node.
    out = await governed.runner.start("escalate_input", {"message": "refund 1005"}, principal="a")
    assert out.status == "waiting", out
    [request_id] = out.pending
    request = await governed.requests.get(request_id)
    assert request is not None
    assert (request.tool, request.shown["content"]) == ("@input", "refund 1005")
    await governed.decide_as_operator(request_id, "approve", principal="bob")
    await governed.worker.drain()
    run = await governed.runs.get(out.run_id)
    assert run is not None
    assert run.status == "completed", run
    trail = await points(governed, out.run_id)
    assert trail[:3] == [
        ("agent_startup", "allow"),
        ("input", "allow"),
        ("pre_model_call", "allow"),
    ]
    assert [p for p, _ in trail].count("agent_startup") == 1
