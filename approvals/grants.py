"""Standing grants: an approver's "always" for one tool in one run, bounded by policy.

An escalate rule that says ``allow_always`` lets the sole approver of its request decide it
``always`` (``approvals.decisions.decide``). The decision itself is an approve or a reject,
stored and audited as any other; it also makes a :class:`Grant` for the request's run, its
tool and the rule that escalated it, within the rule's bounds (:class:`Within`). A later call
of that tool in that run, escalated by that rule with arguments within the bounds, is decided
by the live grant instead of opening a request (``graphs.hooks.approval``). A grant only ever
lifts an escalation: a rule that denies a call is never consulted about grants. An operator
revokes a grant, and the calls after ask a human again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from approvals.decision_kinds import Ruling
from approvals.errors import ApprovalsError, Category

#: The key of a request's shown copy that says its rule allows "always", and within what.
SHOWN_KEY = "allow_always"


@dataclass(frozen=True, kw_only=True, slots=True)
class Bound:
    """The limits of one numeric argument: ``min <= value <= max`` (either may be absent)."""

    min: float | None = None
    max: float | None = None

    def admits(self, value: Any) -> bool:
        """Whether ``value`` is a finite number (never a boolean) within the limits."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if not math.isfinite(value):
            return False
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)

    def to_json(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.min is not None:
            out["min"] = self.min
        if self.max is not None:
            out["max"] = self.max
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class Within:
    """The bounds of a rule's standing grants, by top-level argument name; none: any
    arguments the rule escalates."""

    bounds: dict[str, Bound] = field(default_factory=dict)

    def covers(self, args: Any) -> bool:
        """Whether a call's arguments are within every bound (a missing argument is not)."""
        if not self.bounds:
            return True
        if not isinstance(args, dict):
            return False
        return all(name in args and b.admits(args[name]) for name, b in self.bounds.items())

    def to_json(self) -> dict[str, Any]:
        return {name: bound.to_json() for name, bound in sorted(self.bounds.items())}

    @classmethod
    def from_json(cls, value: Any) -> Within | None:
        """The bounds a stored or shown copy holds; ``None`` when it is malformed (then no
        grant may be made or used: fail closed)."""
        if not isinstance(value, dict):
            return None
        bounds: dict[str, Bound] = {}
        for name, limits in value.items():
            if not isinstance(name, str) or not isinstance(limits, dict) or not limits:
                return None
            if set(limits) - {"min", "max"}:
                return None
            numbers = [limits.get("min"), limits.get("max")]
            if any(
                n is not None and (isinstance(n, bool) or not isinstance(n, int | float))
                for n in numbers
            ):
                return None
            bounds[name] = Bound(min=limits.get("min"), max=limits.get("max"))
        return cls(bounds=bounds)


@dataclass(frozen=True, kw_only=True, slots=True)
class Offer:
    """What a request's shown copy says about "always": the rule it binds and its bounds."""

    rule: str
    within: Within

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "within": self.within.to_json()}

    @classmethod
    def of(cls, shown: dict[str, Any]) -> Offer | None:
        """The offer a request's shown copy carries, or ``None`` (none, or malformed)."""
        value = shown.get(SHOWN_KEY)
        if not isinstance(value, dict) or not isinstance(value.get("rule"), str):
            return None
        within = Within.from_json(value.get("within", {}))
        if within is None or not value["rule"]:
            return None
        return cls(rule=value["rule"], within=within)


@dataclass(frozen=True, kw_only=True, slots=True)
class Grant:
    """A standing grant: one approver's "always" for ``tool`` in ``run_id``."""

    id: str
    run_id: str
    tool: str
    rule: str
    ruling: Ruling
    within: Within
    request_id: str
    granted_by: str
    granted_at: datetime
    uses: int
    revoked_at: datetime | None
    revoked_by: str | None

    @property
    def live(self) -> bool:
        return self.revoked_at is None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Grant:
        return cls(
            id=str(row["id"]),
            run_id=str(row["run_id"]),
            tool=row["tool"],
            rule=row["rule"],
            ruling=Ruling(row["ruling"]),
            # A stored grant was checked when made; malformed bounds cover nothing.
            within=Within.from_json(row["within"]) or Within(bounds={"": Bound(min=1, max=0)}),
            request_id=str(row["request_id"]),
            granted_by=row["granted_by"],
            granted_at=row["granted_at"],
            uses=int(row["uses"]),
            revoked_at=row["revoked_at"],
            revoked_by=row["revoked_by"],
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "run_id": self.run_id,
            "tool": self.tool,
            "rule": self.rule,
            "decision": self.ruling.value,
            "within": self.within.to_json(),
            "request_id": self.request_id,
            "granted_by": self.granted_by,
            "granted_at": self.granted_at.isoformat(),
            "uses": self.uses,
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
            "revoked_by": self.revoked_by,
        }


@runtime_checkable
class StandingGrants(Protocol):
    """Where standing grants are kept. The PostgreSQL requests adapter is one: the approval
    slot asks it before it opens a request (an adapter without grants offers none)."""

    async def make_grant(
        self, *, request_id: str, decision_id: str, ruling: Ruling, offer: Offer, principal: str
    ) -> Grant:
        """Record the grant a decision made, with its audit event (``grant.made``)."""
        ...

    async def use_grant(
        self,
        *,
        run_id: str,
        tool: str,
        rule: str,
        call_id: str,
        identity: str,
        args: dict[str, Any],
    ) -> Grant | None:
        """The grant that decides this call (``identity``: its content identity): the one that
        decided it before, else a live one covering ``args``, its use kept and audited
        (``grant.used``), a rejecting grant before an approving one. ``None``: ask a human
        (also for a call that has a request of its own already)."""
        ...

    async def grants_of(self, run_id: str) -> list[Grant]:
        """Every grant made in a run, live or revoked, oldest first."""
        ...

    async def revoke_grant(self, grant_id: str, *, principal: str) -> Grant | None:
        """Revoke a grant (audited, ``grant.revoked``); ``None`` when there is no such grant.
        Revoking a revoked grant changes nothing and returns it."""
        ...


class GrantNotFound(ApprovalsError):
    """A grant id that names no standing grant (or one the caller may not see)."""

    category = Category.NOT_FOUND

    def __init__(self, grant_id: str) -> None:
        self.grant_id = grant_id
        super().__init__(f"no such grant: {grant_id[:80]!r}")
