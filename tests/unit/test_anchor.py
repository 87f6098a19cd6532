"""Anchors of the chain's head: what a signed, linked anchor file accepts and what it refuses."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from approvals import anchor as anchors
from approvals.anchor import AnchorCheck
from approvals.audit import GENESIS, Problem
from approvals.errors import AnchorInvalid

KEY = b"k" * 40


def chain_of_lines(*heads: tuple[int, str]) -> list[str]:
    lines: list[str] = []
    for event_id, hash in heads:
        previous = anchors.line_digest(lines[-1]) if lines else None
        at = datetime(2026, 1, 1, tzinfo=UTC)
        lines.append(
            anchors.sign(KEY, event_id=event_id, hash=hash, previous=previous, at=at).line()
        )
    return lines


def test_a_file_of_signed_linked_anchors_reads_back_as_written() -> None:
    lines = chain_of_lines((3, "a" * 64), (9, "b" * 64))
    read = anchors.read(lines, KEY, source="f")
    assert [(a.event_id, a.hash) for a in read] == [(3, "a" * 64), (9, "b" * 64)]
    assert read[0].anchored_at == "2026-01-01T00:00:00.000000Z"


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("event_id", True, "event_id must be a whole number"),
        ("event_id", -1, "event_id must be a whole number"),
        ("version", 2, "unknown version"),
        ("hash", None, "must be strings"),
        ("extra", 1, "exactly the fields"),
        ("event_id", 4, "signature does not match"),
    ],
)
def test_an_anchor_edited_in_any_field_is_refused(field: str, value: object, reason: str) -> None:
    doc = json.loads(chain_of_lines((3, "a" * 64))[0])
    doc[field] = value
    with pytest.raises(AnchorInvalid, match=reason) as refused:
        anchors.read([json.dumps(doc)], KEY, source="anchors.jsonl")
    assert (refused.value.source, refused.value.line) == ("anchors.jsonl", 1)


def test_the_check_names_the_anchored_event_whose_hash_changed() -> None:
    read = anchors.read(chain_of_lines((2, "a" * 64), (5, "b" * 64)), KEY, source="f")
    check = AnchorCheck(read)
    for event_id, hash in [(1, "x"), (2, "a" * 64), (3, "y"), (4, "z"), (5, "c" * 64)]:
        check.see(event_id, hash)
    finding = check.finish(5)
    assert finding is not None
    assert (finding.event_id, finding.problem) == (5, Problem.CHANGED)
    assert "after event 2, whose anchor still holds" in finding.detail


def test_an_anchor_of_the_empty_log_holds_only_for_genesis() -> None:
    assert (
        AnchorCheck(anchors.read(chain_of_lines((0, GENESIS)), KEY, source="f")).finish(0) is None
    )
    forged = AnchorCheck(anchors.read(chain_of_lines((0, "a" * 64)), KEY, source="f")).finish(7)
    assert forged is not None
    assert forged.event_id == 0
