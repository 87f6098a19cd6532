"""A graph registered in ``approvals.toml`` whose factory is ``async def build(deps)`` (as one
that loads its tools with ``await client.get_tools()`` is) is awaited wherever the engine
builds graphs: a run starts and pauses, an edit is checked, a worker that never built it
resumes it, ``approvals tools list`` lists it; on real PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from approvals.errors import GraphLoadError
from tests.integration.helpers import scalar, side_effects
from tests.integration.inprocess import invoke
from web.engine import open_engine
from web.settings import Settings

CONFIG = '[graphs]\nasync_refund = "tests.integration.item6_graphs:build_async"\n'


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    config = tmp_path / "approvals.toml"
    config.write_text(CONFIG)
    return Settings(database_url=database_url, config_file=config)


async def test_an_async_factory_graph_pauses_and_a_worker_that_never_built_it_runs_it_once(
    settings: Settings, database_url: str
) -> None:
    async with open_engine(database_url, settings) as engine:
        out = await engine.runner.start(
            "async_refund", {"message": "refund 1001 25"}, principal="alice"
        )
        assert out.status == "waiting", out
        [request_id] = out.pending
        request = await engine.requests.get(request_id)
        assert request is not None
        assert request.tool == "issue_refund"
        assert request.shown["args"] == {"order_id": "1001", "amount": 25.0}
        assert await side_effects(engine, out.run_id, "refund-1001") == []

    # Another process (its registry empty): the edit is checked against the graph's tool and
    # governance, and its worker builds the graph to resume the run.
    async with open_engine(database_url, settings) as other:
        await other.decide_as_operator(
            request_id, "approve", principal="bob", args={"order_id": "1001", "amount": 20.0}
        )
        assert await other.worker.drain() == 1
        run = await other.runs.get(out.run_id)
        assert run is not None
        assert run.status == "completed", run
        assert run.answer is not None
        assert run.answer.endswith("Tool response:\nrefunded 20.00 on 1001")
        ran = await side_effects(other, out.run_id, "refund-1001")
        assert [r["args"]["amount"] for r in ran] == [20.0]
        assert await scalar(other, "select count(*) from tool_executions") == 1


async def test_before_it_is_loaded_a_sync_accessor_says_how_to_build_it(
    settings: Settings, database_url: str
) -> None:
    async with open_engine(database_url, settings) as engine:
        with pytest.raises(GraphLoadError, match=r"async factory .*GraphRegistry\.load"):
            engine.registry.get("async_refund")
        await engine.registry.load("async_refund")
        graph = engine.registry.get("async_refund")
        assert engine.registry.get("async_refund") is graph
        assert [t.name for t in engine.registry.tools("async_refund")] == ["issue_refund"]
        assert engine.registry.governance("async_refund") is not None


async def test_tools_list_lists_an_async_factory_graphs_tools(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "approvals.toml"
    config.write_text(CONFIG)
    result = await invoke(
        {**cli_env, "APPROVALS_CONFIG_FILE": str(config)}, "tools", "list", "async_refund", "--json"
    )
    assert result.code == 0, result
    [tool] = result.json()["async_refund"]
    assert tool["name"] == "issue_refund"
    assert tool["sensitive"] is True


async def test_policy_check_against_an_async_factory_graph_reads_its_tools(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "approvals.toml"
    config.write_text(CONFIG)
    policy = tmp_path / "refund.yaml"
    policy.write_text(
        "policy: refund\ndefault: allow\nrules:\n  - id: big\n    point: pre_tool_call\n"
        "    tool: issue_refnd\n    action: escalate\n    approvers: [support]\n"
    )
    env = {**cli_env, "APPROVALS_CONFIG_FILE": str(config)}
    refused = await invoke(env, "policy", "check", str(policy), "--graph", "async_refund")
    assert refused.code == 2, refused
    assert "did you mean 'issue_refund'?" in refused.stderr
