"""Pages of requests: who is looking, what they asked for, and where the next page starts.

Every list of requests is selected in SQL by what its viewer may see (``Viewer``, the
approver rules of ``approvals.authz`` as query parameters) and paged by keyset: a page ends
with an opaque cursor that holds the last row's sort key and id, and the next page starts
strictly after it. A request that arrives while someone pages therefore never moves what they
have not read yet, and no page costs more than the first.

A cursor is validated, not signed: it only says where to resume, and the rows after it are
still only those the viewer may see, so a forged one shows nothing a fresh listing would not.
It is bound to its listing (which list, which order, which filters): taken to another one, or
garbled, it is ``InvalidCursor`` (the API's 422), never a server error.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

from approvals.authz import ApproverRules
from approvals.errors import InvalidCursor, InvalidValue
from approvals.json_values import text_problem
from approvals.principals import Principal

#: Longest cursor text accepted (an issued one is about 150 characters).
MAX_CURSOR = 512
#: The most rows a page may ask for, and how many it holds when the caller does not say.
MAX_PAGE = 500
DEFAULT_PAGE = 50
#: The longest text filter (a tool, a group, a starter's principal id).
MAX_FILTER_TEXT = 200
#: The oldest age a filter may name (an age beyond it matches what no age filter would).
MAX_AGE = timedelta(days=3650)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Scope(enum.StrEnum):
    """Which of the requests a viewer may see a list holds."""

    SEE = "see"  #: every one it may see
    DECIDE = "decide"  #: those it may also decide
    OTHERS = "others"  #: those it may see but not decide (its own runs', or an operator's)


class PendingOrder(enum.StrEnum):
    DEADLINE = "deadline"  #: soonest expiry first (the inbox's order)
    NEWEST = "newest"  #: newest request first


@dataclass(frozen=True, kw_only=True, slots=True)
class Viewer:
    """A principal as the list queries take it: the approver rules' inputs, so that the SQL
    selects exactly the requests ``ApproverRules.may_see`` allows (and, for a ``decide``
    list, those ``may_decide`` allows). The rules stay the authority when a request is
    decided; this only chooses what is listed."""

    principal: str
    #: ``Principal.person``: who acts (``None`` for a service token, which decides nothing).
    person: str | None
    groups: tuple[str, ...]
    #: Whether the principal is in the default approver group (which decides a request that
    #: names no approver group).
    default_member: bool
    operator: bool
    default_group: str

    @classmethod
    def of(cls, principal: Principal, rules: ApproverRules) -> Viewer:
        return cls(
            principal=principal.id,
            person=principal.person,
            groups=tuple(sorted(principal.groups)),
            default_member=rules.default_group in principal.groups,
            operator=rules.is_operator(principal),
            default_group=rules.default_group,
        )

    def params(self) -> dict[str, Any]:
        """The query parameters of visibility (see ``storage/sql/requests.sql``)."""
        return {
            "principal": self.principal,
            "person": self.person,
            "groups": list(self.groups),
            "default_member": self.default_member,
            "operator": self.operator,
            "default_group": self.default_group,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class RequestFilter:
    """What a list is narrowed to; ``None`` is any. The ages count from the first page's
    moment (kept in the cursor), so that the pages of one listing agree."""

    tool: str | None = None
    #: Requests this approver group may decide (the default group: those naming none).
    group: str | None = None
    run_id: str | None = None
    #: Who started the run (``requested_by``, a principal id).
    starter: str | None = None
    #: Asked at least this long ago.
    min_age: timedelta | None = None
    #: Asked at most this long ago.
    max_age: timedelta | None = None

    def check(self) -> None:
        """``InvalidValue`` naming the first filter that can match nothing by construction: a
        run that is not a run id, text PostgreSQL cannot compare (a NUL), or an age out of
        bounds."""
        for name in ("tool", "group", "starter"):
            value = getattr(self, name)
            if value is None:
                continue
            problem = text_problem(value)
            if problem is None and not 0 < len(value) <= MAX_FILTER_TEXT:
                problem = f"must be 1 to {MAX_FILTER_TEXT} characters"
            if problem is not None:
                raise InvalidValue(name, problem)
        if self.run_id is not None and not _canonical_uuid(self.run_id):
            raise InvalidValue("run", "is not a run id")
        for name in ("min_age", "max_age"):
            age = getattr(self, name)
            if age is not None and not timedelta(0) <= age <= MAX_AGE:
                raise InvalidValue(name, f"must be 0 to {int(MAX_AGE.total_seconds())} seconds")

    def as_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "group": self.group,
            "run_id": self.run_id,
            "starter": self.starter,
            "min_age": _seconds(self.min_age),
            "max_age": _seconds(self.max_age),
        }

    def params(self, asof: datetime, default_group: str) -> dict[str, Any]:
        """The query parameters of the filters, ages resolved against ``asof``."""
        return {
            "tool": self.tool,
            "group": self.group,
            "group_is_default": self.group is not None and self.group == default_group,
            "run_id": self.run_id,
            "starter": self.starter,
            "created_before": asof - self.min_age if self.min_age is not None else None,
            "created_after": asof - self.max_age if self.max_age is not None else None,
        }


#: No filter: every request the viewer may see.
EVERY_REQUEST = RequestFilter()


def _seconds(value: timedelta | None) -> float | None:
    return value.total_seconds() if value is not None else None


def listing_key(listing: str, filters: RequestFilter, viewer: Viewer) -> str:
    """What a cursor is bound to: the list, its order and filters, and whose it is."""
    text = json.dumps(
        [listing, filters.as_json(), viewer.principal], sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, kw_only=True, slots=True)
class Cursor:
    """Where the next page of one listing starts: strictly after the row (``key``, ``id``) in
    the listing's order. ``asof`` is the first page's moment (what the age filters count
    from); ``bound`` is the listing's ``listing_key``."""

    bound: str
    asof: datetime
    key: datetime
    id: str

    def encode(self) -> str:
        payload = {
            "v": 1,
            "b": self.bound,
            "a": _micros(self.asof),
            "k": _micros(self.key),
            "i": self.id,
        }
        raw = json.dumps(payload, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str, *, bound: str) -> Cursor:
        """The cursor ``text`` stands for, if it was issued for the listing ``bound``;
        ``InvalidCursor`` for anything else."""
        if not text or len(text) > MAX_CURSOR or not text.isascii():
            raise InvalidCursor("it is empty, too long or not ASCII")
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            payload = json.loads(raw)
        except (binascii.Error, ValueError):
            raise InvalidCursor("it is not one this server issued") from None
        if not isinstance(payload, dict) or set(payload) != {"v", "b", "a", "k", "i"}:
            raise InvalidCursor("it is not one this server issued")
        if payload["v"] != 1:
            raise InvalidCursor("it is of another version; start from the first page")
        if payload["b"] != bound:
            raise InvalidCursor(
                "it belongs to another listing (other filters, order or viewer); start from"
                " the first page"
            )
        asof, key, row_id = payload["a"], payload["k"], payload["i"]
        # The age filters count back from ``asof`` as far as MAX_AGE: a moment that leaves no
        # room for it is no first page's.
        asof_valid = _valid_micros(asof) and asof >= _FIRST_ASOF
        if not (asof_valid and _valid_micros(key) and _canonical_uuid(row_id)):
            raise InvalidCursor("it is not one this server issued")
        return cls(bound=bound, asof=_from_micros(asof), key=_from_micros(key), id=row_id)


def _micros(moment: datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def _from_micros(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def _valid_micros(value: Any) -> bool:
    # bool is an int; a moment datetime cannot hold (years 1-9999) is refused too.
    return type(value) is int and _FIRST <= value <= _LAST


def _canonical_uuid(value: Any) -> bool:
    if not isinstance(value, str) or len(value) != 36:
        return False
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


#: The moments a cursor may hold (microseconds since the epoch): what ``datetime`` can.
_FIRST = _micros(datetime(1, 1, 2, tzinfo=UTC))
_LAST = _micros(datetime(9999, 12, 30, tzinfo=UTC))
_FIRST_ASOF = _micros(datetime(1, 1, 2, tzinfo=UTC) + MAX_AGE)


T = TypeVar("T")


@dataclass(frozen=True, kw_only=True, slots=True)
class Page(Generic[T]):
    """One page of a listing, and the cursor of the next (``None``: this is the last)."""

    items: list[T]
    next_cursor: str | None
