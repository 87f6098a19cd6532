"""Standing grants through the faces: the JSON API (an approver decides ``always``; an operator,
and only an operator, lists and revokes) and the CLI (``approvals decide --always``,
``approvals grants list`` and ``revoke``), on real PostgreSQL with a real HTTP server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.helpers import person_token, served_api
from tests.integration.inprocess import invoke
from tests.integration.test_standing_grants import pending_of, ran, start, status
from web.engine import Engine
from web.settings import Settings

pytestmark = pytest.mark.asyncio(loop_scope="session")


def api_settings(database_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=database_url,
        data_dir=tmp_path,
        config_file=tmp_path / "none.toml",
        secret_key="test-secret-key-" + "x" * 32,
    )


async def test_the_api_decides_always_and_only_an_operator_lists_and_revokes(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    settings = api_settings(database_url, tmp_path)
    approver = await person_token(engine, "ann", "approvers")
    operator = await person_token(engine, "olga", "approvers", "operators")
    wire = await start(engine, "wire:x")
    run = await start(engine, "pay:50 pay:60 pay:500")
    [request_id] = run.pending
    async with served_api(engine, settings, approver) as api:
        shown = (await api.get(f"/api/v1/pending/{request_id}")).json()
        assert shown["allow_always"] == {
            "rule": "pay-needs-approval",
            "within": {"amount": {"max": 100}},
        }
        refused = await api.post(
            f"/api/v1/pending/{wire.pending[0]}/decision",
            json={"decision": "approve", "always": True},
        )
        assert refused.status_code == 422, refused.text
        assert "cannot be decided always" in refused.text
        decided = await api.post(
            f"/api/v1/pending/{request_id}/decision",
            json={"decision": "approve", "always": True},
        )
        assert decided.status_code == 200, decided.text
        assert decided.json()["decision"] == "approve"
        await engine.drain()
        assert [c for c, _, _ in await ran(engine, run.run_id)] == ["c0", "c1"]
        listed = await api.get(f"/api/v1/runs/{run.run_id}/grants")
        assert listed.status_code == 403, listed.text
        [grant] = await engine.grants_of(run.run_id, by="ops")
        revoked = await api.post(f"/api/v1/grants/{grant.id}/revoke")
        assert revoked.status_code == 403, revoked.text
    async with served_api(engine, settings, operator) as api:
        listed = await api.get(f"/api/v1/runs/{run.run_id}/grants")
        assert listed.status_code == 200, listed.text
        [seen] = listed.json()
        assert (seen["id"], seen["decision"], seen["uses"], seen["granted_by"]) == (
            grant.id,
            "approve",
            1,
            "token:ann",
        )
        revoked = await api.post(f"/api/v1/grants/{grant.id}/revoke")
        assert revoked.status_code == 200, revoked.text
        assert revoked.json()["revoked_by"] is not None
        unknown = await api.post(f"/api/v1/grants/{'0' * 8}-0000-4000-8000-{'0' * 12}/revoke")
        assert unknown.status_code == 404, unknown.text
    [still] = await engine.grants_of(run.run_id, by="ops")
    assert not still.live


async def test_the_cli_decides_always_lists_and_revokes(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    await engine.accounts.add_user("bob", "correct horse battery staple", ["approvers"])
    run = await start(engine, "pay:50 pay:500 pay:60")
    decided = await invoke(cli_env, "decide", run.pending[0], "approve", "--as", "bob", "--always")
    assert decided.code == 0, decided.stderr
    await engine.drain()
    listed = await invoke(cli_env, "grants", "list", run.run_id, "--json")
    assert listed.code == 0, listed.stderr
    [grant] = listed.json()
    assert (grant["tool"], grant["decision"]) == ("pay", "approve")
    assert grant["granted_by"] == "local:bob"
    revoked = await invoke(cli_env, "grants", "revoke", grant["id"], "--as", "cli:ops", "--json")
    assert revoked.code == 0, revoked.stderr
    assert revoked.json()["revoked_by"] == "cli:ops"
    [pending] = await pending_of(engine, run.run_id)
    await engine.decide_as_operator(pending, "approve", principal="bob")
    await engine.drain()
    assert (await status(engine, run.run_id)).status == "waiting"
    missing = await invoke(cli_env, "grants", "revoke", "not-a-grant")
    assert missing.code == 4, missing.stderr
