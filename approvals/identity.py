"""Content identity: what binds a decision to the exact call an approver saw.

``jcs-sha256``: SHA-256 over the RFC 8785 canonical JSON of the shown context (run, call id,
tool, arguments), the same scheme AGENT-HOOKS-0.1 uses for its context identities.
"""

from __future__ import annotations

import contextlib
import hashlib
from typing import Any

import orjson
from agent_hooks import canonical_json

SCHEME = "jcs-sha256"


def jcs_sha256(value: Any) -> str:
    """``jcs-sha256:<hex>`` of any JSON value (the canonical form is computed by the
    agent-hooks core, the same code that computes the contract's context identities)."""
    digest = hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()
    return f"{SCHEME}:{digest}"


def call_identity(*, run_id: str, call_id: str, tool: str, args: dict[str, Any]) -> str:
    """The identity of one tool call as shown to an approver."""
    return jcs_sha256({"run_id": run_id, "call_id": call_id, "tool": tool, "args": args})


class Unreadable(dict[str, Any]):
    """Stands in for a stored JSON value that could not be read back at all (nested deeper
    than any decoder here goes: jsonb keeps it, and only a rewrite behind the engine's back
    makes one, as the engine caps the depth of what it writes). Empty, so a reader that only
    looks into it finds nothing; never digested (``shown_digest`` refuses it), so a request
    whose shown copy is one counts as changed, as one the canonical form refuses does."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Unreadable()"


def shown_digest(*, run_id: str, call_id: str, tool: str, shown: dict[str, Any]) -> str:
    """The digest of everything an approver is shown for one request (arguments, description,
    the rule that escalated it, redaction markers), checked before it is displayed or decided.
    ``ValueError`` for an ``Unreadable`` copy: what could not be read has no digest."""
    if isinstance(shown, Unreadable):
        raise ValueError("the shown copy could not be read back from the database")
    return jcs_sha256({"run_id": run_id, "call_id": call_id, "tool": tool, "shown": shown})


#: ``checked_shown_digest``'s memo: a key that stands for exactly one JSON value, to its digest.
_CHECKED: dict[bytes, str] = {}
#: At most this many digests kept, of shown copies (with their run, call id and tool) of at most
#: ``_CHECKED_MAX_BYTES`` as orjson writes them: a few MB at most.
_CHECKED_MAX = 4096
_CHECKED_MAX_BYTES = 2048
#: Types orjson writes as something else (a datetime as a string, a subclass of str as a
#: str): handed to ``_refuse`` instead, so that a key is only ever made of JSON values.
_KEY_OPTIONS = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def _refuse(value: Any) -> Any:
    raise TypeError(type(value).__name__)


def checked_shown_digest(*, run_id: str, call_id: str, tool: str, shown: dict[str, Any]) -> str:
    """``shown_digest``, remembered for the shown copies seen last: an inbox page checks the
    digest of each of its rows every time it is listed, and the canonical form is most of
    that check's cost (about 8 us a row; a key and a lookup are under 1 us).

    The memo's key is the value itself as orjson writes it with sorted keys, so one key is
    one JSON value (key order aside, which the canonical form ignores too). Where orjson
    would write two values alike, the value is not remembered: NaN and the infinities (which
    it writes as null: any key holding ``null`` is left out, so none can stand for one),
    values it cannot write (a lone surrogate, an integer beyond 64 bits), and types that are
    not JSON (refused by ``_refuse``). A ``uuid.UUID``, an ``Enum`` member or an
    ``orjson.Fragment``, which orjson writes as their text or value without asking, get the
    digest of the JSON value their key stands for where ``shown_digest`` raises for them; a
    copy read back from the database holds JSON values only.

    What is remembered is the digest of the value decoded from the key itself, so an entry is
    right by construction, whatever happens to ``shown`` while it is digested."""
    try:
        key = orjson.dumps((run_id, call_id, tool, shown), default=_refuse, option=_KEY_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        key = b""
    if not key or len(key) > _CHECKED_MAX_BYTES or b"null" in key:
        return shown_digest(run_id=run_id, call_id=call_id, tool=tool, shown=shown)
    found = _CHECKED.get(key)
    if found is None:
        # The digest of the value the key was made of, not of ``shown`` read a second time: a
        # dict changed in between (by another thread holding it) must not leave its new
        # value's digest under its old value's key, for every later copy equal to the old.
        try:
            denoted = orjson.loads(key)
        except orjson.JSONDecodeError:  # an orjson.Fragment's text, which need not be JSON
            return shown_digest(run_id=run_id, call_id=call_id, tool=tool, shown=shown)
        found = shown_digest(
            run_id=denoted[0], call_id=denoted[1], tool=denoted[2], shown=denoted[3]
        )
        _CHECKED[key] = found
        while len(_CHECKED) > _CHECKED_MAX:
            # The oldest go. Another thread may have taken the same one first, so this one
            # tries again until the memo is within its bound (one attempt each let two
            # threads evicting at once leave it one larger, time after time).
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                del _CHECKED[next(iter(_CHECKED))]
    return found


#: What ``PendingCall.current_shown_digest`` reports for a shown copy no digest can be taken of
#: (an integer past 2^53, an infinity, nesting past the canonical form's limit: all of which
#: jsonb can hold after an insider's rewrite). Never a digest: ``shown_intact`` is false for it
#: whatever the row's recorded digest says.
UNREPRESENTABLE = f"{SCHEME}:unrepresentable"


def idempotency_key(*, run_id: str, call_id: str) -> str:
    """A stable key for the one execution a (run, call) may have; tools pass it downstream."""
    return hashlib.sha256(f"approvals:{run_id}:{call_id}".encode()).hexdigest()[:32]
