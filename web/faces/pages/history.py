"""The history (``/history``): the requests the signed-in principal may see that are no longer
pending, with who decided what and what happened after, newest decision first, a page at a
time."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from web.deps import EngineDep, SignedIn
from web.faces.pages.list_query import Listing
from web.faces.pages.rendering import render

#: The history page.
router = APIRouter(include_in_schema=False)


@router.get("/history")
async def history(request: Request, session: SignedIn, engine: EngineDep) -> Response:
    listing = Listing.parse(request)
    page = await engine.history_page(
        session.principal, filters=listing.filters, cursor=listing.cursor
    )
    return render(
        request,
        "history.html",
        session,
        rows=[{"request": r, **outcome} for r, outcome in page.items],
        form=listing.form,
        next_page=listing.next_page(request, page.next_cursor),
        first_page=listing.first_page(request),
    )
