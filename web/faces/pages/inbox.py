"""The inbox (``/``): what the signed-in principal may decide, soonest deadline first, a page at
a time, and the live updates it follows (``/events``).

Server-rendered (Jinja2, autoescaped), no inline script: the page works without JavaScript;
``/static/app.js`` only adds live updates (server-sent events) and countdowns.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from approvals.listing import Scope
from web.deps import EngineDep, SignedIn, sessions_of
from web.faces.pages.list_query import Listing
from web.faces.pages.rendering import render
from web.faces.request_stream import open_stream

#: How many of the requests a principal may see but not decide the inbox's first page shows.
VIEW_ONLY_SHOWN = 10

#: The inbox, its live updates, and the icon a browser asks for with it.
router = APIRouter(include_in_schema=False)


@router.get("/favicon.ico")
async def favicon() -> Response:
    return Response(status_code=204)


@router.get("/")
async def inbox(request: Request, session: SignedIn, engine: EngineDep) -> Response:
    # The inbox holds what this principal may decide, soonest deadline first, a page at a
    # time; what it may only see (its own runs' calls, or everything for operators) is
    # its own list (?scope=others), of which the first page shows a few.
    listing = Listing.parse(request)
    scope = Scope.OTHERS if request.query_params.get("scope") == "others" else Scope.DECIDE
    page = await engine.pending_page(
        session.principal,
        scope=scope,
        order=listing.order,
        filters=listing.filters,
        cursor=listing.cursor,
    )
    view_only = None
    if scope is Scope.DECIDE and listing.cursor is None:
        view_only = await engine.pending_page(
            session.principal,
            scope=Scope.OTHERS,
            order=listing.order,
            filters=listing.filters,
            limit=VIEW_ONLY_SHOWN,
        )
    total, per_group = await engine.pending_counts(session.principal)
    return render(
        request,
        "inbox.html",
        session,
        scope=scope.value,
        items=[r for r, _ in page.items],
        view_only=[r for r, _ in view_only.items] if view_only else [],
        more_view_only=view_only is not None and view_only.next_cursor is not None,
        total=total,
        per_group=per_group,
        form=listing.form,
        next_page=listing.next_page(request, page.next_cursor),
        first_page=listing.first_page(request),
    )


@router.get("/events")
async def events(request: Request, session: SignedIn, engine: EngineDep) -> Response:
    """Server-sent events of the requests this principal may see
    (``web.faces.request_stream``, pushed, never polled); ``signed-out`` as soon as its session
    ends."""
    sessions = sessions_of(request)

    async def still_signed_in() -> bool:
        current = await sessions.read(request, fresh=True)
        return current is not None and current.principal == session.principal

    return await open_stream(engine, session.principal, still_signed_in, session_id=session.id)
