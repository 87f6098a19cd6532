"""A request that needs two approvers: votes, one per principal, any rejection rejects, and the
vote that completes the quorum consumes the request exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from approvals.authz import ApproverRules
from approvals.errors import AlreadyVoted, InvalidDecision, NotAllowed, RequestNotPending
from approvals.model import DecisionRecord, Vote
from approvals.principals import Principal
from tests.integration.governed_graphs import GRAPHS
from tests.integration.helpers import scalar
from web.engine import Engine, open_engine
from web.settings import Settings


@pytest.fixture
async def governed(database_url: str, tmp_path: Path) -> AsyncIterator[Engine]:
    settings = Settings(
        database_url=database_url, config_file=tmp_path / "none.toml", graphs=GRAPHS
    )
    async with open_engine(database_url, settings) as engine:
        yield engine


async def paused(engine: Engine) -> tuple[str, str]:
    out = await engine.runner.start("quorum", {"message": "refund 1001"}, principal="local:shop")
    assert out.status == "waiting", out
    request = await engine.requests.get(out.pending[0])
    assert request is not None
    assert (request.quorum, request.approvers) == (2, ("support",))
    return out.run_id, request.id


async def test_two_distinct_approvals_consume_the_request(governed: Engine) -> None:
    run_id, request_id = await paused(governed)
    first = await governed.decide_as_operator(request_id, "approve", principal="local:ann")
    assert isinstance(first, Vote)
    assert (first.approvals, first.quorum) == (1, 2)
    with pytest.raises(AlreadyVoted):
        await governed.decide_as_operator(request_id, "approve", principal="local:ann")
    assert await governed.requests.votes(request_id) == ["local:ann"]
    assert await governed.worker.drain() == 0  # nothing to resume yet
    second = await governed.decide_as_operator(request_id, "approve", principal="local:bob")
    assert isinstance(second, DecisionRecord)
    assert second.principal == "local:bob"
    with pytest.raises(RequestNotPending):
        await governed.decide_as_operator(request_id, "approve", principal="local:cy")
    assert await governed.worker.drain() == 1
    run = await governed.runs.get(run_id)
    assert run is not None
    assert run.status == "completed"
    assert await scalar(governed, "select count(*) from demo_side_effects") == 1


async def test_any_rejection_rejects(governed: Engine) -> None:
    _, request_id = await paused(governed)
    assert isinstance(
        await governed.decide_as_operator(request_id, "approve", principal="local:ann"), Vote
    )
    rejected = await governed.decide_as_operator(
        request_id, "reject", principal="local:bob", reason="no"
    )
    assert isinstance(rejected, DecisionRecord)
    assert rejected.kind == "reject"
    with pytest.raises(RequestNotPending):
        await governed.decide_as_operator(request_id, "approve", principal="local:cy")


async def test_a_request_with_a_quorum_cannot_be_edited(governed: Engine) -> None:
    _, request_id = await paused(governed)
    with pytest.raises(InvalidDecision, match="cannot be edited"):
        await governed.decide_as_operator(
            request_id,
            "approve",
            principal="local:ann",
            args={"order_id": "1001", "amount": 5.0, "reason": "less"},
        )
    assert await governed.requests.votes(request_id) == []


async def test_racing_approvers_complete_the_quorum_once(governed: Engine) -> None:
    _, request_id = await paused(governed)

    async def approve(name: str) -> object:
        try:
            return await governed.decide_as_operator(
                request_id, "approve", principal=f"local:{name}"
            )
        except RequestNotPending as exc:
            return exc

    outcomes = await asyncio.gather(*(approve(f"a{i}") for i in range(12)))
    decisions = [o for o in outcomes if isinstance(o, DecisionRecord)]
    votes = [o for o in outcomes if isinstance(o, Vote)]
    refused = [o for o in outcomes if isinstance(o, RequestNotPending)]
    assert (len(decisions), len(votes), len(refused)) == (1, 1, 10)
    assert await scalar(governed, "select count(*) from decisions") == 1
    assert await scalar(governed, "select count(*) from resume_queue") == 1
    assert await governed.worker.drain() == 1
    assert await scalar(governed, "select count(*) from demo_side_effects") == 1


# One person, one vote: a person's API token and web account are one approver.

PASSWORD = "correct horse battery staple"


async def alices_token(engine: Engine, *groups: str) -> str:
    """``token:alice-bot``, which belongs to the local account alice (in ``groups``)."""
    await engine.accounts.add_user("alice", PASSWORD, list(groups))
    await engine.accounts.create_token("alice-bot", list(groups), "test", owner="alice")
    return "token:alice-bot"


async def test_one_persons_token_and_account_are_one_vote(governed: Engine) -> None:
    token = await alices_token(governed, "support")
    _, request_id = await paused(governed)
    first = await governed.decide_as_operator(request_id, "approve", principal=token)
    assert isinstance(first, Vote)
    with pytest.raises(AlreadyVoted, match=r"\(as token:alice-bot\)"):
        await governed.decide_as_operator(request_id, "approve", principal="local:alice")
    assert await governed.requests.votes(request_id) == ["token:alice-bot"]
    assert await governed.requests.vote_of(request_id, "local:alice") == "token:alice-bot"
    assert await governed.worker.drain() == 0  # still one approval of two
    second = await governed.decide_as_operator(request_id, "approve", principal="local:bob")
    assert isinstance(second, DecisionRecord)
    assert await governed.worker.drain() == 1
    assert await scalar(governed, "select count(*) from demo_side_effects") == 1


async def test_one_persons_principals_racing_cast_one_vote(governed: Engine) -> None:
    token = await alices_token(governed, "support")
    _, request_id = await paused(governed)

    async def approve(principal: str) -> object:
        try:
            return await governed.decide_as_operator(request_id, "approve", principal=principal)
        except AlreadyVoted as exc:
            return exc

    outcomes = await asyncio.gather(*(approve(p) for p in [token, "local:alice"] * 3))
    assert sum(isinstance(o, Vote) for o in outcomes) == 1
    assert sum(isinstance(o, AlreadyVoted) for o in outcomes) == 5
    assert await scalar(governed, "select count(*) from decisions") == 0
    assert await scalar(governed, "select count(*) from approval_votes") == 1


async def test_a_service_token_casts_no_vote(governed: Engine) -> None:
    await governed.accounts.create_token("shop-bot", ["support"], "test", owner=None)
    _, request_id = await paused(governed)
    with pytest.raises(NotAllowed, match="service token"):
        await governed.decide_as_operator(request_id, "approve", principal="token:shop-bot")
    assert await governed.requests.votes(request_id) == []


async def test_whoever_started_a_run_with_a_token_cannot_decide_it_as_themselves(
    governed: Engine,
) -> None:
    token = await alices_token(governed, "support", "agents")
    out = await governed.runner.start("quorum", {"message": "refund 1001"}, principal=token)
    request = await governed.requests.get(out.pending[0])
    assert request is not None
    assert (request.requested_by, request.requested_by_person) == (token, "local:alice")
    rules = ApproverRules()
    alice = await governed.accounts.authenticate("alice", PASSWORD)
    assert alice is not None
    with pytest.raises(NotAllowed, match="separation of duties"):
        rules.check_decide(alice, request)
    bob = Principal.local("bob", frozenset({"support"}))
    assert rules.may_decide(bob, request)
