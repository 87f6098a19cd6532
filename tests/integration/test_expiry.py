"""Nothing waits forever: a request past its deadline is expired (a rejection the run learns of)
or escalated to the next approver group, exactly once, and never approved after its deadline."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from approvals.errors import RequestNotPending
from approvals.model import DecisionRecord, OnExpiry, RequestStatus, Vote
from graphs.orchestration.worker import ExpirySweeper
from tests.integration.expiry_graphs import GRAPHS
from tests.integration.helpers import scalar, side_effects, start_refund
from tests.integration.inprocess import invoke
from tests.waiting import eventually
from web.engine import Engine, open_engine
from web.settings import Settings


@pytest.fixture
async def governed(database_url: str, tmp_path: Path) -> AsyncIterator[Engine]:
    settings = Settings(
        database_url=database_url, config_file=tmp_path / "none.toml", graphs=GRAPHS
    )
    async with open_engine(database_url, settings) as engine:
        yield engine


async def set_deadline(engine: Engine, request_id: str, seconds_from_now: float) -> None:
    """Move a request's deadline (into the past: it is due now)."""
    async with engine.connection() as conn:
        await conn.execute(
            "update approval_requests set expires_at = now() + make_interval(secs => %s)"
            " where id = %s",
            (seconds_from_now, request_id),
        )


async def request_events(engine: Engine, request_id: str) -> list[str]:
    """The kinds of a request's own events in the decision log (``request.*``), in order."""
    async with engine.connection() as conn:
        rows = await (
            await conn.execute(
                "select kind from audit_events where request_id = %s and kind like 'request.%%'"
                " order by id",
                (request_id,),
            )
        ).fetchall()
    return [r["kind"] for r in rows]


async def audit_event(engine: Engine, request_id: str, kind: str) -> dict[str, Any]:
    async with engine.connection() as conn:
        row = await (
            await conn.execute(
                "select * from audit_events where request_id = %s and kind = %s",
                (request_id, kind),
            )
        ).fetchone()
    assert row is not None, f"no {kind} event for {request_id}"
    return row


async def test_a_request_past_its_deadline_expires_and_the_run_learns_it_was_rejected(
    engine: Engine,
) -> None:
    run = await start_refund(engine)
    request_id = run.pending[0]
    expiry = engine.expiry
    assert not await expiry.sweep()  # not due yet: nothing happens

    await set_deadline(engine, request_id, -1)
    swept = await expiry.sweep()
    assert swept.expired == (request_id,)
    assert swept.escalated == ()
    assert not await expiry.sweep()  # once only

    stored = await engine.requests.get(request_id)
    assert stored is not None
    assert stored.status is RequestStatus.EXPIRED
    _, decision = await engine.requests.decision_of(request_id)
    assert decision is not None
    assert (decision.kind, decision.principal, decision.reason) == (
        "reject",
        "system:expiry",
        "expired",
    )
    assert await engine.worker.drain() == 1
    finished = await engine.runs.get(run.run_id)
    assert finished is not None
    assert finished.status == "completed"
    # The model was told: the refund was not issued because its approval expired.
    assert finished.answer is not None
    assert "Refund not issued (approval_expired): the approval request expired" in finished.answer
    assert await side_effects(engine, run.run_id, "refund-1001") == []
    assert "refund-1001" not in {e.call_id for e in await engine.ledger.for_run(run.run_id)}
    assert await request_events(engine, request_id) == ["request.created", "request.expired"]
    with pytest.raises(RequestNotPending) as refused:
        await engine.decide_as_operator(request_id, "approve", principal="bob")
    assert refused.value.status == "expired"


async def test_an_approval_after_the_deadline_is_refused_and_the_run_resumes_as_expired(
    database_url: str, tmp_path: Path
) -> None:
    # The refund policy gives its requests a day; the host's TTL applies where a policy names
    # no deadline, as the strictest graph's escalation does not.
    settings = Settings(
        database_url=database_url,
        config_file=tmp_path / "none.toml",
        request_ttl_seconds=1,
        graphs={"strictest": "tests.integration.governed_graphs:strictest"},
    )
    async with open_engine(database_url, settings) as engine:
        out = await engine.runner.start("strictest", {"message": "refund 1001"}, principal="a")
        assert out.status == "waiting", out
        request_id = out.pending[0]
        request = await engine.requests.get(request_id)
        assert request is not None
        assert request.expires_at - request.created_at < timedelta(seconds=2)
        # The deadline passes, by the database's clock (the one a decision is checked by).
        await eventually(
            lambda: scalar(
                engine,
                "select expires_at <= now() from approval_requests where id = %s",
                request_id,
            ),
            what="the request's deadline to pass",
        )

        # The approver submits after the deadline, before any sweep: refused.
        with pytest.raises(RequestNotPending) as refused:
            await engine.decide_as_operator(request_id, "approve", principal="local:ann")
        assert refused.value.status == "expired"
        assert await scalar(engine, "select count(*) from decisions") == 0
        assert await scalar(engine, "select count(*) from resume_queue") == 0

        swept = await ExpirySweeper(expiry=engine.expiry).sweep()
        assert swept.expired == (request_id,)
        assert await engine.worker.drain() == 1
        finished = await engine.runs.get(out.run_id)
        assert finished is not None
        assert finished.status == "completed"
        assert "approval_expired" in (finished.answer or "")
        assert await side_effects(engine, out.run_id, "refund-1001") == []
        # The log says so: expired by the system, never decided by the approver.
        kinds = await request_events(engine, request_id)
        assert "request.expired" in kinds
        assert "request.decided" not in kinds
        expired = await audit_event(engine, request_id, "request.expired")
        assert expired["principal"] == "system:expiry"
        with pytest.raises(RequestNotPending):
            await engine.decide_as_operator(request_id, "approve", principal="local:ann")


async def test_deciders_racing_the_sweeper_at_the_deadline_give_exactly_one_outcome(
    engine: Engine,
) -> None:
    expiry = engine.expiry
    outcomes: set[RequestStatus] = set()
    for round_ in range(10):
        run = await start_refund(engine, principal=f"shop-{round_}")
        request_id = run.pending[0]
        await set_deadline(engine, request_id, 0.15)

        async def decide(i: int, request_id: str = request_id) -> object:
            # Around the deadline, mostly after it: some rounds a decider is in time, some
            # rounds none is and the sweeper takes the request. Time is the point: a random
            # moment near the deadline.
            await asyncio.sleep(random.uniform(0.145, 0.2))
            try:
                return await engine.decide_as_operator(
                    request_id, "approve", principal=f"approver-{i}"
                )
            except RequestNotPending as exc:
                return exc

        deciding = asyncio.gather(*(decide(i) for i in range(8)))

        async def sweep(deciding: asyncio.Future[list[object]]) -> list[str]:
            # A sweeper sweeping often, through the deadline, until every decider has had its
            # answer, and once more after that: a request no decider got in time was past its
            # deadline for one of them, so that last sweep expires it if none did before.
            expired: list[str] = []
            while True:
                last = deciding.done()
                expired.extend((await expiry.sweep()).expired)
                if last:
                    return expired
                await asyncio.sleep(0.01)  # the sweeper's pace: time is the point

        expired = await sweep(deciding)
        decided = await deciding
        won = [d for d in decided if isinstance(d, DecisionRecord)]
        assert all(isinstance(d, DecisionRecord | RequestNotPending) for d in decided)
        assert len(won) + len(expired) == 1, (won, expired)
        assert (
            await scalar(engine, "select count(*) from decisions where request_id = %s", request_id)
            == 1
        )
        stored = await engine.requests.get(request_id)
        assert stored is not None
        outcomes.add(stored.status)
        assert stored.status is (RequestStatus.APPROVED if won else RequestStatus.EXPIRED)

        await engine.worker.drain()
        effects = await side_effects(engine, run.run_id, "refund-1001")
        assert len(effects) == (1 if won else 0)
        finished = await engine.runs.get(run.run_id)
        assert finished is not None
        assert finished.status == "completed"
    assert outcomes <= {RequestStatus.APPROVED, RequestStatus.EXPIRED}
    assert await scalar(engine, "select count(*) from resume_queue where status <> 'done'") == 0


async def test_an_escalation_chain_hands_the_request_on_then_expires_it(governed: Engine) -> None:
    out = await governed.runner.start("escalating", {"message": "refund 1001"}, principal="shop")
    assert out.status == "waiting", out
    request_id = out.pending[0]
    request = await governed.requests.get(request_id)
    assert request is not None
    assert request.approvers == ("support",)
    assert request.on_expiry is OnExpiry.ESCALATE
    assert [s.to_json() for s in request.escalation_chain] == [
        {"approvers": ["finance"], "expires_in_seconds": 3600}
    ]
    assert request.escalation_level == 0
    expiry = governed.expiry

    await set_deadline(governed, request_id, -1)
    first = await expiry.sweep()
    assert (first.escalated, first.expired) == ((request_id,), ())
    escalated = await governed.requests.get(request_id)
    assert escalated is not None
    assert escalated.status is RequestStatus.PENDING
    assert escalated.approvers == ("finance",)
    assert escalated.escalation_level == 1
    assert escalated.escalation_chain == ()
    left = escalated.expires_at - datetime.now(UTC)
    assert timedelta(minutes=59) < left <= timedelta(hours=1)
    event = await audit_event(governed, request_id, "request.escalated")
    assert event["data"]["approvers"] == ["finance"]
    assert event["data"]["from_approvers"] == ["support"]
    assert event["data"]["escalation_level"] == 1
    assert datetime.fromisoformat(event["data"]["expires_at"]) == escalated.expires_at
    assert await scalar(governed, "select count(*) from resume_queue") == 0
    run = await governed.runs.get(out.run_id)
    assert run is not None
    assert run.status == "waiting"

    await set_deadline(governed, request_id, -1)
    second = await expiry.sweep()
    assert (second.escalated, second.expired) == ((), (request_id,))
    assert await governed.worker.drain() == 1
    finished = await governed.runs.get(out.run_id)
    assert finished is not None
    assert finished.status == "completed"
    assert "approval_expired" in (finished.answer or "")
    assert await side_effects(governed, out.run_id, "refund-1001") == []
    assert await request_events(governed, request_id) == [
        "request.created",
        "request.escalated",
        "request.expired",
    ]


async def test_a_chain_step_rewritten_to_a_far_deadline_escalates_within_ten_years(
    governed: Engine,
) -> None:
    # A step of 200,000,000 days (the engine writes none past ten years) overflowed the
    # timestamp: every pass of the sweep failed on this request, and none expired again.
    out = await governed.runner.start("escalating", {"message": "refund 1001"}, principal="shop")
    request_id = out.pending[0]
    async with governed.connection() as conn:
        await conn.execute(
            "update approval_requests set escalation_chain = %s::jsonb where id = %s",
            ('[{"approvers": ["finance"], "expires_in_seconds": 17280000000000}]', request_id),
        )
    await set_deadline(governed, request_id, -1)
    swept = await governed.expiry.sweep()
    assert swept.escalated == (request_id,)
    escalated = await governed.requests.get(request_id)
    assert escalated is not None
    assert escalated.expires_at - datetime.now(UTC) <= timedelta(days=3650)


async def test_an_escalated_request_is_decided_by_its_new_group_in_time(governed: Engine) -> None:
    out = await governed.runner.start("escalating", {"message": "refund 1001"}, principal="shop")
    request_id = out.pending[0]
    await set_deadline(governed, request_id, -1)
    assert (await governed.expiry.sweep()).escalated == (request_id,)
    decision = await governed.decide_as_operator(request_id, "approve", principal="local:fin")
    assert isinstance(decision, DecisionRecord)
    assert await governed.worker.drain() == 1
    assert len(await side_effects(governed, out.run_id, "refund-1001")) == 1


async def test_a_quorum_vote_after_the_deadline_is_refused_and_votes_survive_escalation(
    governed: Engine,
) -> None:
    out = await governed.runner.start(
        "escalating_quorum", {"message": "refund 1001"}, principal="shop"
    )
    request_id = out.pending[0]
    assert isinstance(
        await governed.decide_as_operator(request_id, "approve", principal="local:sup"), Vote
    )

    # Past the deadline, before the sweep: the vote path refuses too.
    await set_deadline(governed, request_id, -1)
    with pytest.raises(RequestNotPending) as refused:
        await governed.decide_as_operator(request_id, "approve", principal="local:sup2")
    assert refused.value.status == "expired"
    assert await governed.requests.votes(request_id) == ["local:sup"]

    # Escalated: the vote already cast still counts, and the next approver completes the quorum.
    assert (await governed.expiry.sweep()).escalated == (request_id,)
    request = await governed.requests.get(request_id)
    assert request is not None
    assert request.approvers == ("finance", "risk")
    decision = await governed.decide_as_operator(request_id, "approve", principal="local:fin")
    assert isinstance(decision, DecisionRecord)
    assert await governed.worker.drain() == 1
    assert len(await side_effects(governed, out.run_id, "refund-1001")) == 1


async def test_the_running_worker_expires_and_resumes_on_its_own(database_url: str) -> None:
    settings = Settings(database_url=database_url, sweep_interval_seconds=0.05)
    async with open_engine(database_url, settings) as engine:
        run = await start_refund(engine)
        stop = asyncio.Event()
        sweeper = ExpirySweeper(expiry=engine.expiry, interval=settings.sweep_interval_seconds)
        tasks = asyncio.gather(engine.worker.run(stop), sweeper.run(stop))
        try:
            await set_deadline(engine, run.pending[0], -1)

            async def completed() -> bool:
                current = await engine.runs.get(run.run_id)
                return current is not None and current.status == "completed"

            await eventually(completed, timeout=20)
        finally:
            stop.set()
            await asyncio.wait_for(tasks, timeout=15)
        assert await side_effects(engine, run.run_id, "refund-1001") == []


async def test_worker_drain_sweeps_first(engine: Engine, cli_env: dict[str, str]) -> None:
    run = await start_refund(engine)
    await set_deadline(engine, run.pending[0], -1)
    result = await invoke(cli_env, "worker", "--drain")
    assert result.code == 0, result.stderr
    assert result.json() == {"resumed": 1}
    finished = await engine.runs.get(run.run_id)
    assert finished is not None
    assert finished.status == "completed"
    stored = await engine.requests.get(run.pending[0])
    assert stored is not None
    assert stored.status is RequestStatus.EXPIRED
