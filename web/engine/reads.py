"""The reads, what the faces show: the requests and runs a principal may see, one listing's
page at a time, and how many requests wait; a request whose shown copy changed is never shown.

``Engine`` (``web.engine``) delegates these to ``ReadUseCases``; the other use cases use them
too (``decide`` reads the request as its decider may see it).
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from approvals.decisions import parse_request_id
from approvals.errors import InvalidValue, RequestNotFound, RunNotFound, ShownCopyChanged
from approvals.listing import (
    DEFAULT_PAGE,
    EVERY_REQUEST,
    MAX_PAGE,
    Cursor,
    Page,
    PendingOrder,
    RequestFilter,
    Scope,
    Viewer,
    listing_key,
)
from approvals.model import PendingCall, Run, RunStatus
from approvals.principals import Principal
from web.engine.adapters import Adapters, EventHubs

log = logging.getLogger("approvals.engine")


def valid_run_id(value: str) -> bool:
    """Whether ``value`` is a run id the engine could have issued (a UUID, canonical form)."""
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


class ReadUseCases:
    """The engine's reads for the faces (this module's docstring)."""

    def __init__(self, adapters: Adapters, hubs: EventHubs) -> None:
        self._rules = adapters.rules
        self._requests = adapters.requests
        self._runs = adapters.runs
        self._hubs = hubs
        #: pending_counts' recent answers, per visibility: (when, the request events'
        #: generation then, (total, per group)).
        self._counts: dict[
            tuple[bool, tuple[str, ...], bool], tuple[float, int, tuple[int, dict[str, int]]]
        ] = {}

    async def visible_request(self, request_id: str, principal: Principal) -> PendingCall:
        """The request, if ``principal`` may see it. A malformed id is ``InvalidRequestId``;
        an unknown one and one it may not see are both ``RequestNotFound``; a request whose
        shown copy changed is ``ShownCopyChanged`` (recorded)."""
        canonical = parse_request_id(request_id)
        found = await self.shown_request(canonical, viewer=principal.id)
        if found is None or not self._rules.may_see(principal, found):
            if found is not None:
                log.warning(
                    "refused to show request %s to %s (not an approver)", found.id, principal.id
                )
            raise RequestNotFound(canonical)
        return found

    async def visible_run(self, run_id: str, principal: Principal) -> Run:
        """The run, if ``principal`` may see it (its starter, an operator, or whoever may see
        one of its requests); ``RunNotFound`` in every other case, malformed ids included."""
        if not valid_run_id(run_id):
            raise RunNotFound(run_id)
        run = await self._runs.get(run_id)
        if run is None or not self._rules.may_see_run(
            principal, run, await self._requests.for_run(run_id)
        ):
            raise RunNotFound(run_id)
        return run

    async def visible_thread(self, thread_id: str, principal: Principal) -> Run | None:
        """The latest run on thread ``thread_id``, if ``principal`` may see it (as
        ``visible_run``); ``None`` when the thread holds no run yet (a thread id names nothing
        until a run is started on it, so there is nothing to hide); ``RunNotFound`` when it
        may not see it."""
        if not 0 < len(thread_id) <= 200:
            raise RunNotFound(thread_id)
        latest = await self._runs.latest_on_thread(thread_id)
        if latest is None:
            return None
        return await self.visible_run(latest.id, principal)

    async def waiting_threads(self, principal: Principal, limit: int) -> list[Run]:
        """The runs holding a call ``principal`` may decide, one per thread, soonest deadline
        first, at most ``limit`` of them: what the pending listing (``Scope.DECIDE``) holds,
        grouped by thread."""
        runs: dict[str, Run] = {}
        cursor: str | None = None
        while len(runs) < limit:
            page = await self.pending_page(
                principal, scope=Scope.DECIDE, cursor=cursor, limit=MAX_PAGE
            )
            for request, _ in page.items:
                if request.thread_id in runs or len(runs) >= limit:
                    continue
                run = await self._runs.get(request.run_id)
                if run is not None:
                    runs[request.thread_id] = run
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        return list(runs.values())

    def viewer(self, principal: Principal | None) -> Viewer:
        """``principal`` as the list queries take it; ``None`` is the operator console (the
        CLI, which holds the database): it sees every request and decides none through a list."""
        if principal is None:
            return Viewer(
                principal="",
                person=None,
                groups=(),
                default_member=False,
                operator=True,
                default_group=self._rules.default_group,
            )
        return Viewer.of(principal, self._rules)

    async def pending_page(
        self,
        principal: Principal | None,
        *,
        scope: Scope = Scope.SEE,
        order: PendingOrder = PendingOrder.DEADLINE,
        filters: RequestFilter = EVERY_REQUEST,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE,
    ) -> Page[tuple[PendingCall, bool]]:
        """One page of the pending requests ``principal`` may see (``scope``: all, those it
        may decide, those it may only see), intact ones, each with whether it may decide it;
        soonest deadline first by default. ``cursor``: the previous page's ``next_cursor``
        (``InvalidCursor`` when it is not one issued for this same listing). ``None`` as
        ``principal`` is the operator console, which sees everything."""
        viewer = self.viewer(principal)
        bound = listing_key(f"pending:{scope}:{order}", filters, viewer)
        asof, after = _start(cursor, bound, filters, limit)
        rows = await self._requests.pending_page(
            viewer,
            scope=scope,
            order=order,
            filters=filters,
            asof=asof,
            after=after,
            limit=limit + 1,
        )
        next_cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            key = last.expires_at if order is PendingOrder.DEADLINE else last.created_at
            next_cursor = Cursor(bound=bound, asof=asof, key=key, id=last.id).encode()
        # A request whose shown copy changed is left out (and recorded), as on its own page.
        shown = await self.shown_requests(rows[:limit], viewer=viewer.principal or "cli")
        return Page(
            items=[
                (r, principal is not None and self._rules.may_decide(principal, r)) for r in shown
            ],
            next_cursor=next_cursor,
        )

    async def history_page(
        self,
        principal: Principal,
        *,
        filters: RequestFilter = EVERY_REQUEST,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE,
    ) -> Page[tuple[PendingCall, dict[str, Any]]]:
        """One page of the decided (or expired, superseded, cancelled) requests ``principal``
        may see, newest decision first, each with who decided what and what happened after."""
        viewer = self.viewer(principal)
        bound = listing_key("history", filters, viewer)
        asof, after = _start(cursor, bound, filters, limit)
        rows = await self._requests.decided_page(
            viewer, filters=filters, asof=asof, after=after, limit=limit + 1
        )
        next_cursor = None
        if len(rows) > limit:
            last, _ = rows[limit - 1]
            assert last.decided_at is not None, "decided_page returned an undecided request"
            next_cursor = Cursor(bound=bound, asof=asof, key=last.decided_at, id=last.id).encode()
        return Page(items=rows[:limit], next_cursor=next_cursor)

    async def runs_page(
        self,
        principal: Principal,
        *,
        status: RunStatus | None = None,
        graph: str | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE,
    ) -> Page[Run]:
        """One page of the runs ``principal`` may see (``ApproverRules.may_see_run``: those it
        started, those with a request it may see, every run for an operator), newest first,
        optionally of one status and/or graph."""
        viewer = self.viewer(principal)
        if graph is not None:
            RequestFilter(tool=graph).check()
        bound = listing_key(f"runs:{status}:{graph}", EVERY_REQUEST, viewer)
        asof, after = _start(cursor, bound, EVERY_REQUEST, limit)
        rows = await self._runs.page(
            viewer, status=status, graph=graph, after=after, limit=limit + 1
        )
        next_cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            next_cursor = Cursor(bound=bound, asof=asof, key=last.created_at, id=last.id).encode()
        return Page(items=rows[:limit], next_cursor=next_cursor)

    async def pending_counts(self, principal: Principal | None) -> tuple[int, dict[str, int]]:
        """How many pending requests ``principal`` may see, in all and per approver group
        that may decide them (``None``: the console, every request); at most
        ``COUNTS_MAX_AGE_SECONDS`` old."""
        viewer = self.viewer(principal)
        # The count reads every visible pending request (one GROUP BY over an index: a few
        # hundred milliseconds at a million), and every inbox view and live reload asks for
        # it: principals who see the same requests share one count for a few seconds.
        # A change this process heard of (its live views listen) makes them stale at once, so
        # an inbox reloaded for a new request counts it.
        key = (viewer.operator, viewer.groups if not viewer.operator else (), viewer.default_member)
        now = time.monotonic()
        heard = self._hubs.requests_generation
        cached = self._counts.get(key)
        if cached is not None and cached[1] == heard and now - cached[0] < COUNTS_MAX_AGE_SECONDS:
            return cached[2]
        counted = await self._requests.pending_counts(viewer)
        if len(self._counts) > 1000:
            self._counts.clear()
        self._counts[key] = (now, heard, counted)
        return counted

    async def shown_request(self, request_id: str, *, viewer: str) -> PendingCall | None:
        """The request, as it may be shown to ``viewer``; ``ShownCopyChanged`` (recorded in
        the audit log) when its shown copy is no longer the one recorded."""
        found = await self._requests.get(request_id)
        if found is not None and not found.shown_intact:
            await self._requests.record_tampered(found, principal=viewer)
            raise ShownCopyChanged(found.id)
        return found

    async def newest_requests(self, limit: int, *, viewer: str) -> list[PendingCall]:
        """The newest requests of any status, for the operator console (``pending list
        --all``): every one, those whose shown copy changed included (each marked by
        ``shown_intact``, and recorded by ``shown_requests`` as every listing records them)."""
        _check_limit(limit)
        found = await self._requests.search(None, limit)
        await self.shown_requests(found, viewer=viewer)
        return found

    async def shown_requests(
        self, requests: list[PendingCall], *, viewer: str
    ) -> list[PendingCall]:
        """``requests`` without those whose shown copy changed (each recorded once)."""
        intact = []
        for request in requests:
            if request.shown_intact:
                intact.append(request)
            else:
                await self._requests.record_tampered(request, principal=viewer)
        return intact


#: How old a count of pending requests per group may be when it is shown.
COUNTS_MAX_AGE_SECONDS = 5.0


def _start(
    cursor: str | None, bound: str, filters: RequestFilter, limit: int
) -> tuple[datetime, tuple[datetime, str] | None]:
    """Where a listing's page starts: the first page's moment (now, or the cursor's) and the
    keyset position after which it resumes (``None``: the first page)."""
    _check_limit(limit)
    filters.check()
    if cursor is None:
        return datetime.now(UTC), None
    position = Cursor.decode(cursor, bound=bound)
    return position.asof, (position.key, position.id)


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidValue("limit", f"must be 1 to {MAX_PAGE}")
