"""Graphs are found by name; configuration adds graphs; bad entries fail clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

from approvals.errors import GraphLoadError, GraphNotFound, InvalidRunInput
from tests.integration.helpers import scalar
from web.engine import Engine, open_engine
from web.settings import Settings


async def test_a_configured_graph_denies_invalid_arguments_before_asking_anyone(
    database_url: str, tmp_path: Path
) -> None:
    config = tmp_path / "approvals.toml"
    config.write_text('[graphs]\ncustom = "tests.integration.custom_graphs:build"\n')
    settings = Settings(database_url=database_url, config_file=config)
    async with open_engine(database_url, settings) as engine:
        assert "custom" in engine.registry.names()
        out = await engine.runner.start("custom", {"message": "pay"}, principal="ann")
        assert out.status == "completed"
        assert out.pending == []
        assert out.answer is not None
        assert "invalid_arguments" in out.answer
        assert await scalar(engine, "select count(*) from approval_requests") == 0
        assert await scalar(engine, "select count(*) from demo_side_effects") == 0


async def test_unknown_and_broken_graphs_are_refused(database_url: str, tmp_path: Path) -> None:
    settings = Settings(
        database_url=database_url,
        config_file=tmp_path / "none.toml",
        graphs={
            "broken": "tests.integration.custom_graphs:not_a_graph",
            "missing": "no_such_module:build",
            "shapeless": "no-colon",
        },
    )
    async with open_engine(database_url, settings) as engine:
        with pytest.raises(GraphNotFound):
            await engine.runner.start("nope", {"message": "x"}, principal="ann")
        for name in ("broken", "missing", "shapeless"):
            with pytest.raises(GraphLoadError):
                await engine.runner.start(name, {"message": "x"}, principal="ann")
        assert await scalar(engine, "select count(*) from runs") == 0


@pytest.mark.parametrize(
    "payload",
    [[], "text", {}, {"message": ""}, {"message": 3}, {"message": "x", "other": 1}],
)
async def test_bad_run_input_is_refused_and_nothing_is_recorded(
    engine: Engine, payload: object
) -> None:
    with pytest.raises(InvalidRunInput):
        await engine.runner.start("refund", payload, principal="ann")
    assert await scalar(engine, "select count(*) from runs") == 0
