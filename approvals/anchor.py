"""Anchors: the decision log's head, signed and kept outside the database.

Whoever owns the tables can disable the log's triggers, rewrite an event, recompute every later
hash and move the head, and the chain verifies again. An anchor records the head as it was
(event id and hash, and when it was taken), signed with a key the database does not hold. A
chain rewritten after an anchor no longer has the anchored hash at the anchored event.

An anchor file is JSON lines, appended to; each line links to the one before it (``previous``,
the SHA-256 of that line's text), so a line removed, reordered or edited in the middle is found
too. A line's ``signature`` is ``hmac-sha256=`` and the HMAC-SHA256, under the anchor key, of the
line's other fields as compact JSON with sorted keys.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from approvals.audit import GENESIS, Finding, Problem
from approvals.errors import AnchorInvalid

VERSION = 1
SIGNATURE_PREFIX = "hmac-sha256="
_FIELDS = {"version", "event_id", "hash", "anchored_at", "previous", "signature"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Anchor:
    """The head of the chain at ``anchored_at``: event ``event_id`` had hash ``hash``."""

    event_id: int
    hash: str
    anchored_at: str
    previous: str | None
    signature: str = ""

    def unsigned(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "event_id": self.event_id,
            "hash": self.hash,
            "anchored_at": self.anchored_at,
            "previous": self.previous,
        }

    def line(self) -> str:
        """The anchor as one line of an anchor file (without the newline)."""
        return _compact(self.unsigned() | {"signature": self.signature})


def _compact(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _signature(key: bytes, fields: dict[str, Any]) -> str:
    digest = hmac.new(key, _compact(fields).encode("utf-8"), hashlib.sha256).hexdigest()
    return SIGNATURE_PREFIX + digest


def line_digest(line: str) -> str:
    """What the next anchor's ``previous`` holds for this line."""
    return hashlib.sha256(line.encode("utf-8")).hexdigest()


def sign(
    key: bytes, *, event_id: int, hash: str, previous: str | None, at: datetime | None = None
) -> Anchor:
    """A signed anchor of the head (``event_id``, ``hash``), linked to the line ``previous``
    digests."""
    when = (at or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    anchor = Anchor(event_id=event_id, hash=hash, anchored_at=when, previous=previous)
    return Anchor(
        event_id=event_id,
        hash=hash,
        anchored_at=when,
        previous=previous,
        signature=_signature(key, anchor.unsigned()),
    )


def read(lines: Iterable[str], key: bytes, *, source: str) -> list[Anchor]:
    """Every anchor of a file's lines, each checked: its form, its signature under ``key`` and
    its link to the line before. Raises ``AnchorInvalid`` naming the first line that fails."""
    anchors: list[Anchor] = []
    previous: str | None = None
    for number, raw in enumerate(lines, start=1):
        text = raw.rstrip("\n")
        anchor = _parse(text, source, number)
        expected = _signature(key, anchor.unsigned())
        if not hmac.compare_digest(anchor.signature.encode(), expected.encode()):
            raise AnchorInvalid(
                source, number, "its signature does not match (edited, forged or another key)"
            )
        if anchor.previous != previous:
            raise AnchorInvalid(
                source,
                number,
                "it does not link to the line before it (a line was removed, moved or added)",
            )
        anchors.append(anchor)
        previous = line_digest(text)
    return anchors


def _parse(text: str, source: str, number: int) -> Anchor:
    try:
        doc = json.loads(text)
    except ValueError:
        raise AnchorInvalid(source, number, "it is not JSON") from None
    if not isinstance(doc, dict) or set(doc) != _FIELDS:
        raise AnchorInvalid(source, number, f"it must have exactly the fields {sorted(_FIELDS)}")
    if doc["version"] != VERSION:
        raise AnchorInvalid(source, number, f"unknown version {doc['version']!r}")
    event_id, hash_, at = doc["event_id"], doc["hash"], doc["anchored_at"]
    previous, signature = doc["previous"], doc["signature"]
    if not (isinstance(event_id, int) and not isinstance(event_id, bool) and event_id >= 0):
        raise AnchorInvalid(source, number, "event_id must be a whole number")
    if not all(isinstance(v, str) for v in (hash_, at, signature)) or not (
        previous is None or isinstance(previous, str)
    ):
        raise AnchorInvalid(source, number, "hash, anchored_at and signature must be strings")
    return Anchor(
        event_id=event_id, hash=hash_, anchored_at=at, previous=previous, signature=signature
    )


class AnchorCheck:
    """Checks a chain, walked in id order, against anchors: each anchored event must still
    have its anchored hash, and the chain must reach every anchored event."""

    def __init__(self, anchors: Iterable[Anchor]) -> None:
        self._by_id: dict[int, list[Anchor]] = {}
        for anchor in anchors:
            self._by_id.setdefault(anchor.event_id, []).append(anchor)
        self.count = sum(len(v) for v in self._by_id.values())
        #: The last anchored event found as anchored (the chain is sound up to it).
        self._held: int | None = None
        self.finding: Finding | None = None

    def see(self, event_id: int, hash: str) -> Finding | None:
        """Check one event of the chain; the first mismatch is kept and returned."""
        if self.finding is not None:
            return self.finding
        for anchor in self._by_id.pop(event_id, []):
            if not hmac.compare_digest(anchor.hash, hash):
                since = (
                    f"after event {self._held}, whose anchor still holds"
                    if self._held is not None
                    else "at or before it"
                )
                self.finding = Finding(
                    event_id=event_id,
                    problem=Problem.CHANGED,
                    detail=(
                        f"its hash is not the one anchored at {anchor.anchored_at}: the chain"
                        f" was rewritten {since}"
                    ),
                )
                return self.finding
            self._held = event_id
        return None

    def finish(self, last_id: int) -> Finding | None:
        """After the walk: an anchor naming an event the chain no longer reaches."""
        if self.finding is None and 0 in self._by_id:
            # Event 0 is the head of a log that was still empty: its hash is GENESIS.
            self.see(0, GENESIS)
        if self.finding is None and self._by_id:
            missing = min(self._by_id)
            anchor = self._by_id[missing][0]
            self.finding = Finding(
                event_id=missing,
                problem=Problem.REMOVED,
                detail=(
                    f"it was anchored at {anchor.anchored_at}, but the chain ends at event"
                    f" {last_id}"
                ),
            )
        return self.finding
