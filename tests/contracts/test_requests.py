"""The ``ApprovalRequests`` port: one request per (run, call, identity), a new identity for the
call supersedes the pending one, and a tampered copy is recorded once."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from typing import Any

import pytest

from approvals.identity import shown_digest
from approvals.model import DecisionKind, RequestStatus
from tests.contracts.backends import Adapters
from tests.contracts.records import new_request, waiting_run


async def test_opening_a_call_twice_gives_one_request(adapters: Adapters) -> None:
    run = await waiting_run(adapters)

    first, no_decision = await adapters.requests.open(new_request(run, quorum=2))
    again, still_none = await adapters.requests.open(new_request(run))

    assert again == first
    assert no_decision is None
    assert still_none is None
    assert (first.run_id, first.thread_id, first.call_id) == (run.run_id, run.thread_id, "call-1")
    assert (first.status, first.quorum, first.interrupt_id) == (RequestStatus.PENDING, 2, None)
    assert first.shown_digest == shown_digest(
        run_id=run.run_id, call_id="call-1", tool="refund", shown=first.shown
    )
    assert await adapters.requests.get(first.id) == first


async def test_a_new_identity_supersedes_the_pending_request_of_the_call(
    adapters: Adapters,
) -> None:
    run = await waiting_run(adapters)
    old, _ = await adapters.requests.open(new_request(run, identity="identity-a"))
    other_call, _ = await adapters.requests.open(new_request(run, call_id="call-2"))

    new, _ = await adapters.requests.open(new_request(run, identity="identity-b"))

    superseded = await adapters.requests.get(old.id)
    assert superseded is not None
    assert superseded.status is RequestStatus.SUPERSEDED
    assert superseded.decided_at is not None
    assert new.id != old.id
    assert new.status is RequestStatus.PENDING
    untouched = await adapters.requests.get(other_call.id)
    assert untouched is not None
    assert untouched.status is RequestStatus.PENDING


async def test_a_superseding_open_is_one_statement(
    adapters: Adapters, monkeypatch: pytest.MonkeyPatch
) -> None:
    # open_request's insert ran before its supersession, met the pending request in the
    # one-pending-request index and did nothing: every superseding open answered no row, and
    # only the adapter's second statement (meant for a racing open) recorded the request.
    if adapters.backend != "postgres":
        pytest.skip("counts PostgreSQL statements")
    run = await waiting_run(adapters)
    old, _ = await adapters.requests.open(new_request(run, identity="identity-a"))
    db = adapters.requests._db  # type: ignore[attr-defined]
    sent: list[str] = []
    one = db.one

    async def counted(name: str, *args: Any, **kwargs: Any) -> Any:
        sent.append(name)
        return await one(name, *args, **kwargs)

    monkeypatch.setattr(db, "one", counted)
    new, _ = await adapters.requests.open(new_request(run, identity="identity-b"))

    assert sent == ["open_request"]
    assert new.identity == "identity-b"
    assert new.status is RequestStatus.PENDING
    superseded = await adapters.requests.get(old.id)
    assert superseded is not None
    assert superseded.status is RequestStatus.SUPERSEDED


async def test_reopening_a_known_identity_supersedes_nothing(adapters: Adapters) -> None:
    run = await waiting_run(adapters)
    first, _ = await adapters.requests.open(new_request(run, identity="identity-a"))
    second, _ = await adapters.requests.open(new_request(run, identity="identity-b"))

    back, _ = await adapters.requests.open(new_request(run, identity="identity-a"))

    assert back.id == first.id
    assert back.status is RequestStatus.SUPERSEDED
    pending = await adapters.requests.get(second.id)
    assert pending is not None
    assert pending.status is RequestStatus.PENDING


async def test_opening_a_decided_call_returns_its_decision(adapters: Adapters) -> None:
    run = await waiting_run(adapters)
    request, _ = await adapters.requests.open(new_request(run))
    decision = await adapters.decisions.decide(
        request.id,
        kind=DecisionKind.REJECT,
        principal="local:bob",
        reason="not this one",
        args=None,
        args_identity=None,
    )

    again, found = await adapters.requests.open(new_request(run))

    assert again.status is RequestStatus.REJECTED
    assert found == decision


async def test_an_unknown_request_is_none(adapters: Adapters) -> None:
    assert await adapters.requests.get(str(uuid.uuid4())) is None


async def test_who_started_the_run_is_kept_as_a_person(adapters: Adapters) -> None:
    await adapters.accounts.add_user("alice", "correct horse battery staple", ["agents"])
    await adapters.accounts.create_token("alice-bot", ["agents"], "local:admin", owner="alice")
    await adapters.accounts.create_token("ci", ["agents"], "local:admin", owner=None)
    run = await waiting_run(adapters)

    by_token, _ = await adapters.requests.open(
        new_request(
            run, call_id="call-1", requested_by="token:alice-bot", proposed_by="token:alice-bot"
        )
    )
    by_service, _ = await adapters.requests.open(
        new_request(run, call_id="call-2", requested_by="token:ci")
    )
    by_account, _ = await adapters.requests.open(
        new_request(run, call_id="call-3", requested_by="local:alice", proposed_by="local:bob")
    )

    assert (by_token.requested_by_person, by_token.proposed_by) == ("local:alice", "local:alice")
    assert (by_service.requested_by_person, by_service.proposed_by) == (None, None)
    assert (by_account.requested_by_person, by_account.proposed_by) == (
        "local:alice",
        "local:bob",
    )


async def test_a_tampered_copy_is_recorded_once_per_request(adapters: Adapters) -> None:
    run = await waiting_run(adapters)
    request, _ = await adapters.requests.open(new_request(run))
    other, _ = await adapters.requests.open(new_request(run, call_id="call-2"))
    edited = dataclasses.replace(request, shown={"order": 9999})

    await adapters.requests.record_tampered(edited, principal="local:bob")
    await adapters.requests.record_tampered(edited, principal="local:carol")

    assert await adapters.tampered(request.id) == 1
    assert await adapters.tampered(other.id) == 0


async def test_lookers_finding_a_tampered_copy_at_once_record_it_once(adapters: Adapters) -> None:
    # Each looker's statement saw no event in its snapshot: without the row lock first, four at
    # once wrote two to four of them in nearly every round.
    run = await waiting_run(adapters)
    for n in range(20):
        request, _ = await adapters.requests.open(new_request(run, call_id=f"call-{n}"))
        edited = dataclasses.replace(request, shown={"order": 9999})
        await asyncio.gather(
            *(
                adapters.requests.record_tampered(edited, principal=f"local:looker-{i}")
                for i in range(4)
            )
        )
        assert await adapters.tampered(request.id) == 1
