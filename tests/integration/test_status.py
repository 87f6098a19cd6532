"""``approvals status``: the graphs this configuration serves and their digest (the ones
``/readyz`` and the worker's probe report), the schema, and the queued resumes by graph,
naming those of a graph no process of this configuration serves."""

from __future__ import annotations

import pytest

from tests.integration.helpers import start_refund
from tests.integration.inprocess import invoke
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_status_names_queued_resumes_no_graph_here_serves(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    served = await start_refund(engine)
    await engine.decide_as_operator(served.pending[0], "approve", principal="bob")
    orphan = await start_refund(engine, "refund 1002")
    await engine.decide_as_operator(orphan.pending[0], "approve", principal="bob")
    # A run of a graph this configuration no longer registers (removed, or registered only
    # on processes of the next release).
    async with engine.connection() as conn:
        await conn.execute("UPDATE runs SET graph = 'crm' WHERE id = %s", (orphan.run_id,))

    status = await invoke(cli_env, "status", "--json")
    assert status.code == 0, status.stderr
    report = status.json()
    assert "refund" in report["graphs"]
    assert report["config_digest"] == engine.registry.config_digest()
    assert report["schema"]["problem"] is None
    assert report["queued_jobs"] == {"crm": 1, "refund": 1}
    assert report["unserved"] == {"crm": 1}

    text = await invoke(cli_env, "status")
    assert "queued resumes: crm 1, refund 1" in text.stdout
    assert "graph 'crm', which this configuration does not serve" in text.stderr
