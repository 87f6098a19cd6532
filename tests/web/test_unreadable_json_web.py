"""Over HTTP: a request whose shown copy an insider rewrote to nesting too deep to read back
is left out of the inbox (API and page) like any tampered one, refused on its page and for
decisions with 409, recorded once; the other requests are still listed and decided. A
decision-log event so rewritten is listed on the log's pages, its data marked unreadable."""

from __future__ import annotations

import re

import httpx

from tests.integration.helpers import person_token, scalar, start_refund
from tests.web.conftest import Server, SignIn, add_user
from web.engine import Engine

DEEP = "[" * 5_000 + "1" + "]" * 5_000
UNREADABLE = "unreadable (stored value could not be read)"


def client(server: Server, secret: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=server.url, headers={"authorization": f"Bearer {secret}"}, timeout=60
    )


async def test_a_shown_copy_too_deep_to_read_is_left_out_and_refused_not_a_500(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    bad = (await start_refund(engine)).pending[0]
    good = (await start_refund(engine)).pending[0]
    async with engine.connection() as conn:
        await conn.execute(
            "update approval_requests set shown = %s::jsonb where id = %s", (DEEP, bad)
        )
    await add_user(engine, "sue", "support")
    page = sign_in("sue")
    inbox = page.get("/")
    assert inbox.status_code == 200
    assert f"/requests/{good}" in inbox.text
    assert bad not in inbox.text
    assert page.get(f"/requests/{bad}").status_code == 409
    secret = await person_token(engine, "lead", "support")
    async with client(server, secret) as api:
        listed = await api.get("/api/v1/pending")
        assert listed.status_code == 200, listed.text
        assert [r["id"] for r in listed.json()] == [good]
        shown = await api.get(f"/api/v1/pending/{bad}")
        assert shown.status_code == 409
        assert shown.json()["error"]["code"] == "shown_copy_changed"
        refused = await api.post(f"/api/v1/pending/{bad}/decision", json={"decision": "approve"})
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "shown_copy_changed"
        decided = await api.post(f"/api/v1/pending/{good}/decision", json={"decision": "approve"})
        assert decided.status_code == 200, decided.text
    tampered = "select count(*) from audit_events where request_id = %s and kind = %s"
    assert await scalar(engine, tampered, bad, "request.tampered") == 1
    assert await scalar(engine, "select count(*) from decisions where request_id = %s", bad) == 0


async def test_history_and_runs_stay_up_or_fail_with_a_clear_error(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    """A decided request whose copy cannot be read stays in the history (refused on its own
    page); the runs list lists a run whose input cannot be read, whose own report fails with
    a 500 naming the cause."""
    decided = (await start_refund(engine)).pending[0]
    await engine.decide_as_operator(decided, "reject", principal="local:ops", reason="no")
    other = await start_refund(engine)
    async with engine.connection() as conn:
        await conn.execute(
            "update approval_requests set shown = %s::jsonb where id = %s", (DEEP, decided)
        )
        await conn.execute("update runs set input = %s::jsonb where id = %s", (DEEP, other.run_id))
    await add_user(engine, "olga", "operators")
    page = sign_in("olga")
    history = page.get("/history")
    assert history.status_code == 200
    assert f"/requests/{decided}" in history.text
    assert page.get(f"/requests/{decided}").status_code == 409
    secret = await person_token(engine, "opal", "operators")
    async with client(server, secret) as api:
        runs = await api.get("/api/v1/runs")
        assert runs.status_code == 200, runs.text
        assert str(other.run_id) in [r["run_id"] for r in runs.json()]
        report = await api.get(f"/api/v1/runs/{other.run_id}")
        assert report.status_code == 500
        assert report.json()["error"]["code"] == "stored_value_unreadable"
        assert "nested too deeply" in report.json()["error"]["message"]


def event_rows(page: str) -> dict[int, str]:
    """The decision log page's rows, by event id."""
    rows = re.findall(r'<tr class="event">\s*<td>(\d+)</td>(.*?)</tr>', page, re.S)
    return {int(event): row for event, row in rows}


async def test_the_log_shows_every_event_and_marks_the_one_it_cannot_read(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    """An auditor of a tampered database still sees the decision log, on its page and on the
    run's timeline: every event listed, the rewritten one with its data marked unreadable
    (not left out, and not shown with no data as if it had none), the others as before."""
    run = await start_refund(engine)
    decided = run.pending[0]
    await engine.decide_as_operator(decided, "reject", principal="local:ops", reason="refused")
    event = await scalar(
        engine,
        "select id from audit_events where request_id = %s and kind = 'request.created'",
        decided,
    )
    logged = await scalar(engine, "select array_agg(id order by id) from audit_events")
    async with engine.connection() as conn, conn.transaction():
        # The log is append-only for the engine's role; an insider with the superuser is not.
        await conn.execute("set local session_replication_role = replica")
        await conn.execute("update audit_events set data = %s::jsonb where id = %s", (DEEP, event))
    await add_user(engine, "olga", "operators")
    page = sign_in("olga")
    log = page.get("/audit")
    assert log.status_code == 200, log.text[:500]
    rows = event_rows(log.text)
    assert set(logged) <= set(rows)
    assert "request.created" in rows[event]
    assert UNREADABLE in rows[event]
    assert [e for e, row in rows.items() if UNREADABLE in row] == [event]
    decision = next(row for row in rows.values() if "request.decided" in row)
    assert "reject" in decision
    assert "refused" in decision

    timeline = page.get(f"/runs/{run.run_id}")
    assert timeline.status_code == 200, timeline.text[:500]
    entries = re.findall(r'<li class="entry entry-event">(.*?)</li>', timeline.text, re.S)
    marked = [entry for entry in entries if UNREADABLE in entry]
    assert len(marked) == 1
    assert f"#{event}<" in marked[0]
    assert "request.created" in marked[0]
    assert any("refused" in entry for entry in entries)
