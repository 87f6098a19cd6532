"""Every way a request changes is pushed to the process's one listener (migration 0020's
triggers, on PostgreSQL): opened, decided, escalated, expired, superseded, cancelled; a change
too big for a NOTIFY is read back; an ended session is told to its feeds."""

from __future__ import annotations

import time
from typing import Any

from approvals.principals import Principal
from storage.request_events import FeedNews, RequestEvent, RequestEventHub, RequestFeed
from tests.integration.helpers import scalar, start_refund
from web.engine import Engine


async def news_until(feed: RequestFeed, count: int, seconds: float = 20) -> list[RequestEvent]:
    got: list[RequestEvent] = []
    deadline = time.monotonic() + seconds
    while len(got) < count:
        left = deadline - time.monotonic()
        assert left > 0, f"got only {got}"
        news = await feed.wait(left)
        if news is not None:
            got.extend(news.events)
    return got


async def execute(engine: Engine, query: str, *params: Any) -> None:
    async with engine.connection() as conn:
        await conn.execute(query, params)


def hub_of(engine: Engine) -> RequestEventHub:
    return engine.request_streams


async def test_each_kind_of_change_reaches_the_listener_once_in_commit_order(
    engine: Engine,
) -> None:
    feed = await hub_of(engine).subscribe(lambda e: True)
    try:
        first = await start_refund(engine, principal="local:shop")
        second = await start_refund(engine, "refund 1002", principal="local:shop")
        third = await start_refund(engine, principal="local:shop")
        a, b, c = first.pending[0], second.pending[0], third.pending[0]
        await engine.decide_as_operator(a, "approve", principal="local:boss")
        # b's deadline passes: its escalation chain is empty, so it expires.
        await execute(
            engine,
            "UPDATE approval_requests SET expires_at = now() - interval '1 s' WHERE id = %s",
            b,
        )
        await engine.expiry.sweep()
        await engine.cancel_run(third.run_id, by="cli:ops")
        got = await news_until(feed, 6)
    finally:
        feed.close()
    assert [(e.id, e.kind.value, e.status) for e in got] == [
        (a, "opened", "pending"),
        (b, "opened", "pending"),
        (c, "opened", "pending"),
        (a, "decided", "approved"),
        (b, "expired", "expired"),
        (c, "cancelled", "cancelled"),
    ]
    assert got[0].approvers == frozenset({"support"})
    assert got[1].approvers == frozenset({"finance"})
    assert got[0].requested_by == "local:shop"
    assert got[0].requested_by_person == "local:shop"
    assert got[0].run_id == first.run_id
    assert got[0].tool == "issue_refund"


async def test_a_change_too_big_to_notify_commits_and_is_read_back(engine: Engine) -> None:
    feed = await hub_of(engine).subscribe(lambda e: True)
    try:
        out = await start_refund(engine, principal="local:shop")
        request_id = out.pending[0]
        await news_until(feed, 1)
        # 400 approver groups of 30 characters: 12 kB, past NOTIFY's 8000 bytes. The update
        # must still commit (a NOTIFY too long would fail it) and the listener reads the row.
        groups = [f"group-{i:04d}-" + "x" * 19 for i in range(400)]
        await execute(
            engine, "UPDATE approval_requests SET approvers = %s WHERE id = %s", groups, request_id
        )
        [event] = await news_until(feed, 1)
    finally:
        feed.close()
    assert event.id == request_id
    assert event.kind.value == "escalated"
    assert event.approvers == frozenset(groups)
    assert event.run_id == out.run_id
    assert event.requested_by == "local:shop"
    stored = await scalar(
        engine, "SELECT cardinality(approvers) FROM approval_requests WHERE id = %s", request_id
    )
    assert stored == 400


async def test_an_ended_session_ends_its_feeds_and_no_other(engine: Engine) -> None:
    await engine.accounts.add_user("ann", "correct horse battery staple", ["support"])
    ann = Principal.local("ann", frozenset({"support"}))
    await engine.sessions.start("ann-session", ann, ttl_seconds=600)
    await engine.sessions.start("ann-laptop", ann, ttl_seconds=600)
    hub = hub_of(engine)
    feed = await hub.subscribe(lambda e: True, session_id="ann-session")
    other = await hub.subscribe(lambda e: True, session_id="ann-laptop")
    try:
        assert await engine.sessions.end("ann-session")
        news = await feed.wait(10)
        assert news == FeedNews(events=[], missed=False, session_ended=True)
        assert await other.wait(0.3) is None
    finally:
        feed.close()
        other.close()
    assert hub.feeds == 0
