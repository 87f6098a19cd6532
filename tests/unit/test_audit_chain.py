"""The decision log's chain: canonical form, hash, and naming the first tampered event."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import UTC, datetime, timedelta, timezone

from approvals.audit import (
    GENESIS,
    ChainedEvent,
    ChainHead,
    Problem,
    canonical,
    chain_hash,
    verify,
)

T0 = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)


def chain(n: int, *, ids: list[int] | None = None) -> list[ChainedEvent]:
    events: list[ChainedEvent] = []
    prev = GENESIS
    for i in ids or range(1, n + 1):
        event = ChainedEvent(
            id=i,
            at=T0 + timedelta(seconds=i),
            kind="request.decided" if i % 2 else "tool.started",
            run_id="6f1c2c7e-2f0d-4f53-9d0e-0f7a1d3c5b9a",
            request_id=None,
            call_id=f"call-{i}",
            principal="bob",
            state_version="1ef-v",
            tool="refund",
            data_text='{"decision": "approve", "reason": "ok \\"quoted\\""}',
            prev_hash=prev,
        )
        event = dataclasses.replace(event, hash=chain_hash(prev, event))
        events.append(event)
        prev = event.hash
    return events


def head_of(events: list[ChainedEvent]) -> ChainHead:
    return ChainHead(last_id=events[-1].id, hash=events[-1].hash)


def rehash(event: ChainedEvent, prev: str | None = None) -> ChainedEvent:
    prev = event.prev_hash if prev is None else prev
    linked = dataclasses.replace(event, prev_hash=prev)
    return dataclasses.replace(linked, hash=chain_hash(prev, linked))


def test_the_canonical_form_is_sorted_compact_json_with_data_spliced_verbatim() -> None:
    event = ChainedEvent(
        id=7,
        at=datetime(2024, 5, 1, 14, 0, 0, 5, tzinfo=timezone(timedelta(hours=2))),
        kind="request.decided",
        principal='Zoë "the approver"\n',
        data_text='{"reason": "é", "decision": "edit"}',
    )
    text = canonical(event)
    assert text == (
        '{"at":"2024-05-01T12:00:00.000005Z","call_id":null,'
        '"data":{"reason": "é", "decision": "edit"},"id":7,"kind":"request.decided",'
        '"principal":"Zoë \\"the approver\\"\\n","request_id":null,"run_id":null,'
        '"state_version":null,"tool":null}'
    )
    parsed = json.loads(text)
    assert list(parsed) == sorted(parsed)


def test_the_hash_is_sha256_of_the_previous_hash_and_the_canonical_form() -> None:
    event = chain(1)[0]
    expected = hashlib.sha256((GENESIS + canonical(event)).encode()).hexdigest()
    assert event.hash == expected


def test_an_untouched_chain_verifies() -> None:
    events = chain(10)
    assert verify(events, head_of(events)) is None
    assert verify([], ChainHead(last_id=0, hash=GENESIS)) is None


def test_a_changed_event_is_named() -> None:
    events = chain(10)
    events[4] = dataclasses.replace(events[4], principal="mallory")
    finding = verify(events, head_of(events))
    assert finding is not None
    assert (finding.event_id, finding.problem) == (5, Problem.CHANGED)
    assert finding.message.startswith("event 5 was changed")


def test_a_changed_event_whose_hash_was_recomputed_is_named() -> None:
    events = chain(10)
    events[4] = rehash(dataclasses.replace(events[4], principal="mallory"))
    finding = verify(events, head_of(events))
    assert finding is not None
    assert (finding.event_id, finding.problem) == (5, Problem.CHANGED)


def test_a_changed_last_event_is_caught_by_the_head() -> None:
    events = chain(5)
    head = head_of(events)
    events[4] = rehash(dataclasses.replace(events[4], kind="request.rejected"))
    finding = verify(events, head)
    assert finding is not None
    assert (finding.event_id, finding.problem) == (5, Problem.CHANGED)


def test_a_removed_event_is_named() -> None:
    events = chain(10)
    del events[3]
    finding = verify(events, head_of(events))
    assert finding is not None
    assert (finding.event_id, finding.problem) == (4, Problem.REMOVED)
    assert finding.message.startswith("event 4 is missing (removed)")


def test_a_removed_event_is_named_even_when_its_successor_was_relinked() -> None:
    events = chain(10)
    del events[3]
    events[3] = rehash(events[3], prev=events[2].hash)
    for later in range(4, len(events)):
        events[later] = rehash(events[later], prev=events[later - 1].hash)
    head = head_of(events)
    finding = verify(events, head)
    assert finding is not None
    assert (finding.event_id, finding.problem) == (4, Problem.REMOVED)


def test_removing_the_last_events_is_caught_by_the_head() -> None:
    events = chain(10)
    head = head_of(events)
    finding = verify(events[:8], head)
    assert finding is not None
    assert (finding.event_id, finding.problem) == (9, Problem.REMOVED)


def test_an_event_appended_past_the_head_is_inserted_even_if_well_linked() -> None:
    events = chain(5)
    head = head_of(events)
    forged = rehash(dataclasses.replace(events[4], id=6, call_id="forged"), prev=events[4].hash)
    finding = verify([*events, forged], head)
    assert finding is not None
    assert (finding.event_id, finding.problem) == (6, Problem.INSERTED)


def test_an_event_spliced_between_two_others_is_inserted() -> None:
    # Ids numbered before the chain (legacy) may have gaps: room for a forged one.
    relinked = chain(0, ids=[10, 11, 12, 14, 15])
    head = ChainHead(last_id=15, hash=relinked[-1].hash, legacy_until=100)
    assert verify(relinked, head) is None
    # A well-linked forgery at id 13 (the gap): its successor links over it.
    forged = rehash(
        dataclasses.replace(relinked[2], id=13, principal="mallory"), prev=relinked[2].hash
    )
    finding = verify([*relinked[:3], forged, *relinked[3:]], head)
    assert finding is not None
    assert (finding.event_id, finding.problem) == (13, Problem.INSERTED)
    # A clumsy one (garbage link and hash) is inserted too, not "changed".
    clumsy = dataclasses.replace(forged, prev_hash="f" * 64, hash="e" * 64)
    finding = verify([*relinked[:3], clumsy, *relinked[3:]], head)
    assert finding is not None
    assert (finding.event_id, finding.problem) == (13, Problem.INSERTED)


def test_verification_stops_at_the_first_finding() -> None:
    events = chain(10)
    events[2] = dataclasses.replace(events[2], principal="x")
    del events[6]
    finding = verify(events, head_of(events))
    assert finding is not None
    assert finding.event_id == 3
