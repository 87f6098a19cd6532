"""The operators' view of the decision log over real HTTP: the filtered log and a run's
timeline for operators; for anyone else, the same 404 as a page that does not exist."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta

from tests.integration.helpers import start_refund
from tests.waiting import eventually
from tests.web.conftest import Server, SignIn, add_user
from web.engine import Engine


async def refunded(engine: Engine) -> str:
    """A refund run: 1001 approved by ann, 1002 rejected by rob; returns when completed."""
    out = await engine.runner.start(
        "refund", {"message": "refund 1001 and 1002"}, principal="local:shop"
    )
    approve, reject = out.pending
    await engine.decide_as_operator(approve, "approve", principal="local:ann")
    await engine.decide_as_operator(
        reject, "reject", principal="local:rob", reason="duplicate <b>x</b>"
    )

    async def settled() -> bool:
        run = await engine.runs.get(out.run_id)
        assert run is not None
        # Both jobs finished too (the second is skipped after the run completed): the log is
        # still until then.
        return run.status == "completed" and await engine.queue.queued() == 0

    await eventually(settled, what="the run to complete and its jobs to finish")
    return str(out.run_id)


def without_csrf(page: str) -> str:
    """A page without its CSRF token (signed with a timestamp, so it changes every second)."""
    return re.sub(r'name="csrf" value="[^"]*"', 'name="csrf"', page)


def event_ids(page: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr class="event">\s*<td>(\d+)</td>', page)]


def kinds(page: str) -> list[str]:
    return re.findall(r'<tr class="event">.*?<code>([a-z_.]+)</code>', page, re.S)


async def test_an_operator_sees_and_filters_the_log(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "olga", "operators")
    run_id = await refunded(engine)
    other = await engine.runner.start("refund", {"message": "refund 1004"}, principal="local:z")
    c = sign_in("olga")

    assert '<a href="/audit">Audit</a>' in c.get("/").text
    page = c.get("/audit")
    assert page.status_code == 200
    ids = event_ids(page.text)
    assert ids == sorted(ids, reverse=True)
    assert len(ids) == await _count(engine)
    # Shown text is escaped.
    assert "duplicate <b>x</b>" not in page.text
    assert html.escape("duplicate <b>x</b>") in page.text

    by_run = c.get("/audit", params={"run": run_id}).text
    assert event_ids(by_run)
    assert str(other.run_id) not in by_run
    assert f"/runs/{run_id}" in by_run

    by_principal = c.get("/audit", params={"principal": "local:rob"}).text
    assert set(kinds(by_principal)) == {"request.decided", "resume.queued"}

    rejected = c.get("/audit", params={"decision": "reject"}).text
    assert kinds(rejected) == ["request.decided"]
    assert "local:rob" in rejected
    assert "local:ann" not in rejected

    by_tool = kinds(c.get("/audit", params={"tool": "lookup_order"}).text)
    assert by_tool
    assert set(by_tool) <= {"tool.started", "tool.succeeded"}

    future = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    assert event_ids(c.get("/audit", params={"since": future}).text) == []
    assert event_ids(c.get("/audit", params={"until": future}).text) == ids

    refused = c.get("/audit", params={"run": "1 OR 1=1", "since": "soon"})
    assert refused.status_code == 422
    assert "run: not a run id" in refused.text


async def test_the_log_is_paginated(server: Server, engine: Engine, sign_in: SignIn) -> None:
    await add_user(engine, "olga", "operators")
    for _ in range(3):
        await refunded(engine)
    total = await _count(engine)
    assert total > 50
    c = sign_in("olga")
    first = c.get("/audit").text
    assert len(event_ids(first)) == 50
    older = re.search(r'<a href="([^"]+)" rel="next">Older</a>', first)
    assert older is not None
    rest = c.get(html.unescape(older.group(1))).text
    seen = event_ids(first) + event_ids(rest)
    assert seen == list(range(total, total - len(seen), -1))


async def test_a_run_timeline_lists_its_events_in_order(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "olga", "operators")
    run_id = await refunded(engine)
    c = sign_in("olga")
    page = c.get(f"/runs/{run_id}")
    assert page.status_code == 200
    shown = re.findall(r'<code class="kind">([a-z_.]+)</code>', page.text)
    logged = [
        e["kind"] for e in await engine.audit.for_run(run_id) if not e["kind"].startswith("policy.")
    ]
    assert shown == logged
    assert shown[0] == "run.started"
    assert shown.index("request.decided") < shown.index("resume.started")
    assert shown.index("resume.started") < shown.index("run.completed")
    # Interception records are interleaved: the approver's rejection shows as a deny.
    assert "interception #" in page.text
    assert "rejected_by_approver" in page.text


async def test_anyone_but_an_operator_gets_not_found(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "ann", "support")
    await add_user(engine, "olga", "operators")
    run_id = await refunded(engine)
    c = sign_in("ann")
    assert '<a href="/audit">Audit</a>' not in c.get("/").text
    unknown = without_csrf(c.get("/no-such-page").text)
    for path in ("/audit", f"/runs/{run_id}", "/audit?run=" + run_id):
        page = c.get(path)
        assert page.status_code == 404
        assert without_csrf(page.text) == unknown
    operator = sign_in("olga")
    assert operator.get("/runs/00000000-0000-4000-8000-000000000000").status_code == 404
    assert operator.get("/runs/not-a-run").status_code == 404


async def _count(engine: Engine) -> int:
    async with engine.connection() as conn:
        row = await (await conn.execute("select count(*) as n from audit_events")).fetchone()
    assert row is not None
    return int(row["n"])


async def test_a_run_timeline_says_its_resume_waits_for_a_worker_of_its_graph(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "olga", "operators")
    run = await start_refund(engine)
    # Decided, of a graph no worker serves: its resume waits for one.
    async with engine.connection() as conn:
        await conn.execute("UPDATE runs SET graph = 'crm' WHERE id = %s", (run.run_id,))
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    page = sign_in("olga").get(f"/runs/{run.run_id}")
    assert page.status_code == 200
    assert "Waiting for a worker that serves <code>crm</code>: no live worker does" in page.text
