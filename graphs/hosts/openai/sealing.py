"""The version of a paused OpenAI-SDK run's stored state: a keyed MAC (HMAC-SHA256) under the
app's secret, so that someone who can write the state table but does not hold the secret cannot
make a version for a state they wrote.

A plain hash of the text (the version before) proved only that the text and the version agree:
whoever rewrote one could recompute the other. The MAC covers every column a resume trusts from
the row (the run it was made for, the agent, the state text, the calls it waits on and where the
run stood), so a state cannot be moved to another run nor its waiting calls remapped.

The key is derived from the secret (``HMAC(secret, purpose)``), never the secret itself: a MAC
made here is not a signature the sessions would accept, nor the other way round. A version
reads ``hmac-sha256:<key id>:<mac>``; the key id (a short hash of the derived key, which tells
nothing of it) lets the audit log tell a state sealed under another key (a worker configured
with another secret, a rotated secret) from one altered under this key. Both are refused.

A version that is no MAC (``sha256:...``, as stored before versions were keyed) is refused too:
nothing tells an old row from a forgery, since anyone can compute a plain hash.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from enum import StrEnum

PREFIX = "hmac-sha256:"
#: Sets this key apart from every other use of the app's secret (sessions, CSRF).
PURPOSE = b"approvals/openai-run-state/v1"
#: The shortest secret accepted: the app's own setting asks for as much.
MIN_SECRET_LENGTH = 32


class SealCheck(StrEnum):
    """What checking a stored version against its row found."""

    #: This key's MAC of this row.
    INTACT = "intact"
    #: A MAC under this key, of another row: the row was changed since it was sealed.
    ALTERED = "altered"
    #: A MAC under another key: sealed elsewhere (another secret), or forged.
    OTHER_KEY = "other_key"
    #: No MAC at all (a plain hash, as before versions were keyed, or anything else).
    UNKEYED = "unkeyed"

    @property
    def refusal(self) -> str:
        """What a run refused for this is told (its error)."""
        return _REFUSALS[self]


_REFUSALS = {
    SealCheck.INTACT: "the stored run state is intact",
    SealCheck.ALTERED: "the stored run state was altered",
    SealCheck.OTHER_KEY: (
        "the stored run state was sealed under another secret key (every process must have "
        "the same APPROVALS_SECRET_KEY), or altered"
    ),
    SealCheck.UNKEYED: (
        "the stored run state has an unkeyed version (stored before versions were keyed, or "
        "altered)"
    ),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class SealedRow:
    """What a version covers: a stored state's row, as a resume trusts it."""

    #: The run the state is for (at a resume: the claimed job's run, not the row's).
    run_id: str
    #: The registered agent that stored it (at a resume: the one resuming).
    agent: str
    #: The SDK's ``RunState`` as stored.
    state: str
    #: ``(call_id, request_id)`` of each call the run waits on.
    waiting: tuple[tuple[str, str], ...]
    status: str
    answer: str | None
    error: str | None


class StateSeal:
    """Seals and checks the stored state of OpenAI-SDK runs under one secret."""

    def __init__(self, secret: str | bytes) -> None:
        raw = secret.encode("utf-8") if isinstance(secret, str) else secret
        if len(raw) < MIN_SECRET_LENGTH:
            raise ValueError(f"the state key's secret must be {MIN_SECRET_LENGTH}+ bytes")
        self._key = hmac.new(raw, PURPOSE, hashlib.sha256).digest()
        #: Names the key in versions and the audit log without revealing it.
        self.key_id = hashlib.sha256(self._key).hexdigest()[:8]

    def __repr__(self) -> str:
        return f"StateSeal(key_id={self.key_id!r})"

    def version(self, row: SealedRow) -> str:
        """The version ``row`` is stored with: this key's MAC of every column of it."""
        # The fields other than the text as one JSON array, its length first, then the text:
        # no two rows give the same bytes (a field cannot run into the next).
        head = json.dumps(
            [
                row.run_id,
                row.agent,
                [list(pair) for pair in row.waiting],
                row.status,
                row.answer,
                row.error,
            ],
            ensure_ascii=True,
            separators=(",", ":"),
        ).encode("ascii")
        mac = hmac.new(self._key, len(head).to_bytes(8, "big"), hashlib.sha256)
        mac.update(head)
        mac.update(row.state.encode("utf-8", "surrogatepass"))
        return f"{PREFIX}{self.key_id}:{mac.hexdigest()}"

    def check(self, version: str, row: SealedRow) -> SealCheck:
        """Whether ``version`` is this key's MAC of ``row`` (compared in constant time)."""
        if not version.startswith(PREFIX) or version.count(":") != 2:
            return SealCheck.UNKEYED
        if version.split(":")[1] != self.key_id:
            return SealCheck.OTHER_KEY
        expected = self.version(row)
        if hmac.compare_digest(expected.encode("ascii"), version.encode("utf-8", "replace")):
            return SealCheck.INTACT
        return SealCheck.ALTERED
