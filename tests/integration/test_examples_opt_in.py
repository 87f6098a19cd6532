"""The example agents are registered only where the configuration asks for them
(``APPROVALS_EXAMPLES``), or by ``approvals demo``; a deployment's registry holds its own graphs
and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from web.engine import open_engine
from web.settings import Settings

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_deployments_registry_holds_only_its_own_graphs(
    database_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        database_url=database_url,
        data_dir=tmp_path,
        config_file=tmp_path / "none.toml",
        examples=False,
        graphs={"billing": "graphs.examples.refund:build"},
    )
    async with open_engine(database_url, settings) as engine:
        assert engine.agent_names() == ["billing"]
    asked = settings.model_copy(update={"examples": True})
    async with open_engine(database_url, asked) as engine:
        assert {"refund", "email", "billing"} <= set(engine.agent_names())
