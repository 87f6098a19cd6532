"""A list page's query (the inbox, the history): its filters as the approver typed them, what
they mean to the engine, the order, the cursor of the page asked for, and the links to the
next and first pages with the same query."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlencode

from fastapi import Request

from approvals.errors import InvalidValue
from approvals.listing import MAX_FILTER_TEXT, PendingOrder, RequestFilter

#: The filters a list page takes, as GET parameters (ages in seconds).
LIST_FILTERS = ("tool", "group", "run", "starter", "min_age", "max_age")


@dataclass(frozen=True)
class Listing:
    """A list page's query: its filters as typed (shown back in the form), what they mean,
    the order, and the cursor of the page asked for. The engine checks them (422 page)."""

    form: dict[str, str]
    filters: RequestFilter
    order: PendingOrder
    cursor: str | None

    @classmethod
    def parse(cls, request: Request) -> Listing:
        params = request.query_params
        form = {n: params.get(n, "").strip()[:MAX_FILTER_TEXT] for n in LIST_FILTERS}
        order = PendingOrder.NEWEST if params.get("order") == "newest" else PendingOrder.DEADLINE
        if order is PendingOrder.NEWEST:
            form["order"] = order.value
        if params.get("scope") == "others":
            form["scope"] = "others"
        filters = RequestFilter(
            tool=form["tool"] or None,
            group=form["group"] or None,
            run_id=form["run"] or None,
            starter=form["starter"] or None,
            min_age=_age("min_age", form["min_age"]),
            max_age=_age("max_age", form["max_age"]),
        )
        cursor = params.get("cursor") or None
        return cls(form=form, filters=filters, order=order, cursor=cursor)

    def next_page(self, request: Request, cursor: str | None) -> str | None:
        """The URL of the page ``cursor`` starts, with the same query; ``None`` without one."""
        return self._url(request, cursor) if cursor is not None else None

    def first_page(self, request: Request) -> str | None:
        """The URL of this listing's first page; ``None`` on the first page."""
        return self._url(request, None) if self.cursor is not None else None

    def _url(self, request: Request, cursor: str | None) -> str:
        params = {k: v for k, v in self.form.items() if v}
        if cursor is not None:
            params["cursor"] = cursor
        return request.url.path + (f"?{urlencode(params)}" if params else "")


def _age(name: str, text: str) -> timedelta | None:
    if not text:
        return None
    # isascii: str.isdigit() is true of "²", which int() refuses.
    if not (text.isascii() and text.isdigit()) or len(text) > 12:
        raise InvalidValue(name, "must be a number of seconds")
    return timedelta(seconds=int(text))
