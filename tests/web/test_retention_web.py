"""A pruned run over real HTTP: its report is a plain 404 (never a 500), its timeline page too,
and its events stay readable in the operators' audit view."""

from __future__ import annotations

from datetime import timedelta

from tests.integration.helpers import person_token
from tests.web.conftest import Server, SignIn, add_user
from tests.web.test_api import client, started_refund, wait_for_run
from web.engine import Engine


async def test_a_pruned_runs_report_is_404_and_its_audit_events_stay_readable(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    run_id, request_id = await started_refund(server, engine)
    support = await person_token(engine, "lead", "support")
    async with client(server, support) as api:
        decided = await api.post(
            f"/api/v1/pending/{request_id}/decision", json={"decision": "approve"}
        )
        assert decided.status_code == 200, decided.text
        report = await wait_for_run(api, run_id, "completed")
    assert report["status"] == "completed", report
    async with engine.connection() as conn:
        await conn.execute(
            "UPDATE runs SET updated_at = now() - interval '40 days' WHERE id = %s", (run_id,)
        )
    pruned = await engine.prune(timedelta(days=30), principal="ops")
    assert pruned.runs == 1

    # The approver who decided it gets the same 404 as for an id that never was a run.
    async with client(server, support) as api:
        gone = await api.get(f"/api/v1/runs/{run_id}")
        request = await api.get(f"/api/v1/pending/{request_id}")
        unknown = await api.get("/api/v1/runs/00000000-0000-4000-8000-000000000000")
    assert gone.status_code == unknown.status_code == 404, gone.text
    assert gone.json()["error"]["code"] == "not_found"
    assert request.status_code == 404, request.text

    await add_user(engine, "olga", "operators")
    c = sign_in("olga")
    assert c.get(f"/runs/{run_id}").status_code == 404
    audit = c.get("/audit", params={"run": run_id})
    assert audit.status_code == 200
    assert "request.decided" in audit.text
