"""The decision log's hash chain: the canonical form of an event, its hash, and verification.

Every event is linked to the one before it::

    hash = sha256_hex(prev_hash || canonical(event))        (the first prev_hash is GENESIS)

``canonical(event)`` is UTF-8 JSON text with the keys in this order (sorted), no whitespace
between tokens, strings escaped like PostgreSQL's ``to_json`` (``\\" \\\\ \\b \\f \\n \\r \\t``,
other control characters as ``\\u00xx``, everything else verbatim), absent values as ``null``::

    {"at":"2024-05-01T12:00:00.123456Z","call_id":..,"data":<data>,"id":42,"kind":..,
     "principal":..,"request_id":..,"run_id":..,"state_version":..,"tool":..}

``at`` is UTC with six fractional digits; ``data`` is PostgreSQL's text output of the jsonb value,
spliced in verbatim (that text is a deterministic function of the stored value). The database
computes the same form in a trigger when an event is written (migration 0005); this module
recomputes it from the stored columns, so neither side trusts the other.

Ids are gapless (the chain's head hands them out under a lock), so a missing id is a removed
event; ids at or below ``ChainHead.legacy_until`` predate the chain and may have gaps.

An event whose data is nested too deeply to be read back (jsonb keeps any depth; the engine
caps what it writes far below that) was written outside the engine: the log's readers list it
with no data, marked ``data_unreadable`` (``marked_data``), and the verifier fails on it even
where its hash was recomputed to match.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

from approvals.identity import Unreadable

GENESIS = "0" * 64
#: What the log's views say in place of data that could not be read back (``marked_data``).
UNREADABLE_DATA = "unreadable (stored value could not be read)"
#: How many recent links the verifier remembers to recognise a forged event spliced in.
RECENT_LINKS = 256


@dataclass(frozen=True, kw_only=True, slots=True)
class ChainedEvent:
    """One event as stored, with ``data_text`` the jsonb text of its data."""

    id: int
    at: datetime
    kind: str
    run_id: str | None = None
    request_id: str | None = None
    call_id: str | None = None
    principal: str | None = None
    state_version: str | None = None
    tool: str | None = None
    data_text: str = "{}"
    #: Whether ``data_text`` is nested too deeply to be read back (the reader decides it).
    data_unreadable: bool = False
    prev_hash: str = GENESIS
    hash: str = ""

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ChainedEvent:
        return cls(
            id=int(row["id"]),
            at=row["at"],
            kind=row["kind"],
            run_id=_text(row.get("run_id")),
            request_id=_text(row.get("request_id")),
            call_id=row.get("call_id"),
            principal=row.get("principal"),
            state_version=row.get("state_version"),
            tool=row.get("tool"),
            data_text=row["data_text"],
            data_unreadable=bool(row.get("data_unreadable")),
            prev_hash=row["prev_hash"],
            hash=row["hash"],
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ChainHead:
    """Where the database says the chain ends."""

    last_id: int
    hash: str
    legacy_until: int = 0


def marked_data(row: dict[str, Any]) -> dict[str, Any]:
    """An event row as the log's readers give it: ``data_unreadable`` says whether its data
    could be read back. Where it could not (read as ``Unreadable``), ``data`` is ``None``:
    never a stand-in, such as the empty object, that would pass for the event's data, and
    never an error that fails every other event listed with it. (``row``, changed in place.)"""
    unreadable = isinstance(row["data"], Unreadable)
    if unreadable:
        row["data"] = None
    row["data_unreadable"] = unreadable
    return row


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _string(value: str | None) -> str:
    return "null" if value is None else json.dumps(value, ensure_ascii=False)


def format_at(at: datetime) -> str:
    """An event's time in its canonical form: UTC, microseconds, ``Z``."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def canonical(event: ChainedEvent) -> str:
    """The text an event's hash covers (see the module's docstring)."""
    return (
        f'{{"at":{_string(format_at(event.at))}'
        f',"call_id":{_string(event.call_id)}'
        f',"data":{event.data_text}'
        f',"id":{event.id}'
        f',"kind":{_string(event.kind)}'
        f',"principal":{_string(event.principal)}'
        f',"request_id":{_string(event.request_id)}'
        f',"run_id":{_string(event.run_id)}'
        f',"state_version":{_string(event.state_version)}'
        f',"tool":{_string(event.tool)}}}'
    )


def chain_hash(prev_hash: str, event: ChainedEvent) -> str:
    """``sha256_hex(prev_hash || canonical(event))``."""
    return hashlib.sha256((prev_hash + canonical(event)).encode("utf-8")).hexdigest()


class Problem(enum.StrEnum):
    CHANGED = "changed"
    REMOVED = "removed"
    INSERTED = "inserted"


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    """The first event that does not belong to the chain as written."""

    event_id: int
    problem: Problem
    detail: str

    @property
    def message(self) -> str:
        what = {
            Problem.CHANGED: "was changed",
            Problem.REMOVED: "is missing (removed)",
            Problem.INSERTED: "was inserted",
        }[self.problem]
        return f"event {self.event_id} {what}: {self.detail}"

    def to_json(self) -> dict[str, Any]:
        return {"event_id": self.event_id, "problem": self.problem.value, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class _Link:
    id: int
    hash: str


class ChainVerifier:
    """Walks a chain one event at a time (ids ascending), keeping O(1) memory; the first
    finding ends the walk. Feed every event, then ``finish``."""

    def __init__(self, head: ChainHead | None = None) -> None:
        self._head = head
        self._last = _Link(0, GENESIS)
        self._recent: deque[_Link] = deque([self._last], maxlen=RECENT_LINKS)
        # An event whose link is broken waits for the next one, which tells a spliced-in
        # event (the next links over it) from a changed or a removed one.
        self._suspect: ChainedEvent | None = None
        self.count = 0
        self.finding: Finding | None = None

    @property
    def head_hash(self) -> str:
        return self._last.hash

    @property
    def last_id(self) -> int:
        return self._last.id

    def feed(self, event: ChainedEvent) -> Finding | None:
        if self.finding is not None:
            return self.finding
        if self._suspect is not None:
            suspect, self._suspect = self._suspect, None
            self.finding = self._judge(suspect, event)
            return self.finding
        self.finding = self._check(event)
        return self.finding

    def finish(self) -> Finding | None:
        """The finding after the last event: a suspect judged without a successor, or the end
        of the chain disagreeing with the head."""
        if self.finding is not None:
            return self.finding
        if self._suspect is not None:
            suspect, self._suspect = self._suspect, None
            self.finding = self._judge(suspect, None)
            return self.finding
        head = self._head
        if head is None:
            return None
        if self._last.id < head.last_id:
            self.finding = Finding(
                event_id=self._last.id + 1,
                problem=Problem.REMOVED,
                detail=f"the chain ends at event {self._last.id}, its head at {head.last_id}",
            )
        elif self._last.hash != head.hash:
            self.finding = Finding(
                event_id=self._last.id,
                problem=Problem.CHANGED,
                detail="its hash is not the one the chain's head recorded",
            )
        return self.finding

    def _issued(self, event: ChainedEvent) -> bool:
        return self._head is None or event.id <= self._head.last_id

    def _check(self, event: ChainedEvent) -> Finding | None:
        if not self._issued(event):
            return _inserted(event, "the chain's head never issued its id")
        last = self._last
        if event.prev_hash != last.hash:
            spliced = self._linked_before(event.prev_hash)
            if spliced is not None:
                return _inserted(spliced, f"event {event.id} links to the event before it")
            self._suspect = event
            return None
        if chain_hash(event.prev_hash, event) != event.hash:
            self._suspect = event
            return None
        if event.id != last.id + 1 and last.id >= self._legacy_until:
            return Finding(
                event_id=last.id + 1,
                problem=Problem.REMOVED,
                detail=f"event {event.id} follows event {last.id}",
            )
        if event.data_unreadable:
            # Its hash matches (recomputed by whoever wrote it): the data alone gives it away.
            return Finding(
                event_id=event.id,
                problem=Problem.CHANGED,
                detail="its data cannot be read back (nested too deeply, or a number of more"
                " digits than can be read), which the engine never writes",
            )
        self._accept(event)
        return None

    def _judge(self, suspect: ChainedEvent, successor: ChainedEvent | None) -> Finding:
        last = self._last
        if successor is not None and successor.prev_hash == last.hash:
            return _inserted(suspect, f"event {successor.id} links to event {last.id}")
        if suspect.prev_hash == last.hash:
            return Finding(
                event_id=suspect.id,
                problem=Problem.CHANGED,
                detail="its hash does not match its content",
            )
        if chain_hash(suspect.prev_hash, suspect) == suspect.hash:
            if suspect.id > last.id + 1:
                return Finding(
                    event_id=last.id + 1,
                    problem=Problem.REMOVED,
                    detail=f"event {suspect.id} links to an event that is not there",
                )
            if last.id > 0:
                # Both are consistent on their own: the one rewritten to pass is the earlier
                # (its successor still links to what it was).
                return Finding(
                    event_id=last.id,
                    problem=Problem.CHANGED,
                    detail=f"event {suspect.id} links to another version of it",
                )
        return Finding(
            event_id=suspect.id,
            problem=Problem.CHANGED,
            detail=f"it no longer links to event {last.id}",
        )

    @property
    def _legacy_until(self) -> int:
        return self._head.legacy_until if self._head is not None else 0

    def _linked_before(self, prev_hash: str) -> int | None:
        """The id of the event after the recent one whose hash is ``prev_hash`` (the first
        of the events spliced in after it), if any but the last."""
        for before, after in pairwise(self._recent):
            if before.hash == prev_hash:
                return after.id
        return None

    def _accept(self, event: ChainedEvent) -> None:
        self._last = _Link(event.id, event.hash)
        self._recent.append(self._last)
        self.count += 1


def _inserted(event: ChainedEvent | int, detail: str) -> Finding:
    event_id = event if isinstance(event, int) else event.id
    return Finding(event_id=event_id, problem=Problem.INSERTED, detail=detail)


def verify(events: Iterable[ChainedEvent], head: ChainHead | None = None) -> Finding | None:
    """The first event that was changed, removed or inserted, or ``None`` for a sound chain."""
    verifier = ChainVerifier(head)
    for event in events:
        if verifier.feed(event) is not None:
            return verifier.finding
    return verifier.finish()
