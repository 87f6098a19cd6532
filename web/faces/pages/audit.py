"""The operators' view of the decision log: ``/audit``, filtered and paginated (one run's
timeline: ``web.faces.pages.run_timeline``).

Operators only: anyone else gets the same 404 as for a page that does not exist, so the pages
do not reveal that they are there. Server-rendered and escaped like the other pages; filters
are plain GET parameters.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from approvals.audit import UNREADABLE_DATA
from approvals.json_values import text_problem
from approvals.principals import Principal
from web.deps import EngineDep, SignedIn
from web.engine import AuditFilter, Engine
from web.faces.pages.rendering import render

PAGE_SIZE = 50
DECISIONS = ("approve", "reject", "edit", "deny", "transform")
# What an event's data says that a reader wants at a glance, in this order.
SUMMARY_KEYS = (
    "decision",
    "reason",
    "error",
    "identity",
    "args_identity",
    "by_identity",
    "point",
    "interceptor",
    "job",
    "attempt",
    "graph",
    "name",
)


def operator_only(engine: Engine, principal: Principal) -> None:
    """Anyone but an operator gets the 404 of a page that does not exist."""
    if not engine.rules.is_operator(principal):
        raise HTTPException(404, "Not Found")


def run_id_of(value: str) -> str | None:
    """A run id as typed, lower-cased, if it is a UUID in its canonical form; else ``None``."""
    try:
        parsed = str(uuid.UUID(value))
    except ValueError:
        return None
    return parsed if parsed == value.lower() else None


def time_of(value: str) -> datetime | None:
    """An ISO 8601 time from a filter field (a browser's datetime-local has no zone: UTC)."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Filters:
    """The filter form as typed (shown back), what it means, and what was wrong with it."""

    form: dict[str, str]
    query: AuditFilter
    errors: list[str]

    @classmethod
    def parse(cls, params: dict[str, str]) -> Filters:
        names = ("run", "tool", "principal", "decision", "since", "until")
        form = {n: params.get(n, "").strip()[:200] for n in names}
        errors: list[str] = []
        for name in names:
            problem = text_problem(form[name])
            if problem is not None:
                # PostgreSQL cannot compare text holding a NUL: refused, and not shown back.
                errors.append(f"{name}: {problem}")
                form[name] = ""
        run_id = since = until = None
        if form["run"]:
            run_id = run_id_of(form["run"])
            if run_id is None:
                errors.append("run: not a run id")
        for name in ("since", "until"):
            if form[name]:
                parsed = time_of(form[name])
                if parsed is None:
                    errors.append(f"{name}: not an ISO 8601 time")
                elif name == "since":
                    since = parsed
                else:
                    until = parsed
        if form["decision"] and form["decision"] not in DECISIONS:
            errors.append(f"decision: one of {', '.join(DECISIONS)}")
        query = AuditFilter(
            run_id=run_id,
            tool=form["tool"] or None,
            principal=form["principal"] or None,
            decision=form["decision"] or None,
            since=since,
            until=until,
        )
        return cls(form=form, query=query, errors=errors)

    def link(self, **extra: Any) -> str:
        """This page's URL with the same filters (and ``extra``)."""
        params = {k: v for k, v in self.form.items() if v} | {
            k: str(v) for k, v in extra.items() if v is not None
        }
        return "/audit" + (f"?{urlencode(params)}" if params else "")


def summary(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The parts of an event's data worth a glance, as (name, text)."""
    shown = []
    for key in SUMMARY_KEYS:
        value = data.get(key)
        if value is not None and value != "":
            shown.append((key, str(value)))
    return shown


#: The decision log's page.
router = APIRouter(include_in_schema=False)


@router.get("/audit")
async def audit(request: Request, session: SignedIn, engine: EngineDep) -> Response:
    operator_only(engine, session.principal)
    filters = Filters.parse(dict(request.query_params))
    before_text = request.query_params.get("before", "")
    # isascii: str.isdigit() is true of "²", which int() refuses.
    ascii_digits = before_text.isascii() and before_text.isdigit()
    before = int(before_text) if ascii_digits and len(before_text) < 19 else None
    rows: list[dict[str, Any]] = []
    if not filters.errors:
        rows = await engine.audit.search(filters.query, before=before, limit=PAGE_SIZE + 1)
    older = filters.link(before=rows[PAGE_SIZE - 1]["id"]) if len(rows) > PAGE_SIZE else None
    return render(
        request,
        "audit.html",
        session,
        422 if filters.errors else 200,
        events=[{**r, "summary": summary(r["data"] or {})} for r in rows[:PAGE_SIZE]],
        form=filters.form,
        errors=filters.errors,
        decisions=DECISIONS,
        older=older,
        newest=filters.link() if before is not None else None,
        unreadable=UNREADABLE_DATA,
        utc=UTC,
    )
