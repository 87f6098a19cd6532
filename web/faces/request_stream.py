"""Approval requests' changes as server-sent events: ``GET /api/v1/pending/events`` (bearer
tokens) and the pages' ``/events`` (the session cookie), which the inbox follows.

Each web process LISTENs on one connection of its own (``Engine.request_streams``), whatever
the number of streams; a stream costs the database nothing while it waits. A stream hears of a
change only if its principal may see the request (the approver rules of
``approvals.authz.ApproverRules.may_see``: one of the request's approver groups, before or after
an escalation, or the operator group) or started its run; it is told which request, of which
run, which tool, what happened and the status, never what the request shows.

Events:

- ``request``: ``{id, run_id, tool, kind, status}``, ``kind`` one of ``opened``, ``decided``,
  ``expired``, ``escalated``, ``superseded``, ``cancelled``.
- ``resync``: changes may have been missed (the server lost its listening connection, or the
  client fell a thousand changes behind): re-read the list.
- ``signed-out``: the session ended, or the token was revoked (or its groups changed); the
  stream closes.

There are no event ids and nothing to replay: a client that reconnects re-reads its list (a
``Last-Event-ID`` header is ignored). A stream asks again every ``KEEPALIVE_SECONDS`` whether
its principal is still signed in as it was, busy or idle: a principal whose groups changed must
not go on hearing of its old groups' requests. One principal holds at most
``MAX_STREAMS_PER_PRINCIPAL`` streams per web process (429 beyond): each one is a connection,
a task and a backlog of up to a thousand changes, which no single client needs more of.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi.responses import StreamingResponse

from approvals.authz import ApproverRules
from approvals.errors import DatabaseUnavailable
from approvals.principals import Principal
from web.engine import Engine, RequestEvent, RequestEventKind, RequestFeed
from web.errors import ApiError

#: With nothing to tell, a comment this often keeps proxies from closing the stream; this often,
#: too, whether busy or idle, the stream checks that its principal is still signed in (a
#: revoked token's stream ends then).
KEEPALIVE_SECONDS = 15.0
#: Streams one principal may hold open in one web process: a browser's tabs on the inbox (six
#: on HTTP/1.1 share the host's connections anyway), scripts, a few spare.
MAX_STREAMS_PER_PRINCIPAL = 16

StillSignedIn = Callable[[], Awaitable[bool]]


def hears(rules: ApproverRules, principal: Principal, event: RequestEvent) -> bool:
    """Whether ``principal`` may be told of ``event``: it may see the request now, or could
    until the escalation this event is, or it started the request's run."""
    if rules.is_operator(principal):
        return True
    # ApproverRules.deciders: the groups a request names, or the default group.
    default = frozenset({rules.default_group})
    if principal.groups & (event.approvers or default):
        return True
    if event.kind is RequestEventKind.ESCALATED and principal.groups & (
        event.from_approvers or default
    ):
        return True
    return event.requested_by == principal.id or (
        principal.person is not None and event.requested_by_person == principal.person
    )


def sse(payload: dict[str, Any], *, kind: str) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


async def request_events(feed: RequestFeed, still_signed_in: StillSignedIn) -> AsyncIterator[bytes]:
    """The stream's bytes; closes ``feed`` when done (or when the client goes away)."""
    try:
        # The feed was taken before this line: what changes after it is news.
        yield b"retry: 3000\n\n"
        checked = time.monotonic()
        while True:
            news = await feed.wait(KEEPALIVE_SECONDS)
            if news is not None and news.session_ended:
                yield sse({}, kind="signed-out")
                return
            # Asked on a clock, not only when idle: a stream kept busy (its groups' requests
            # changing more often than every KEEPALIVE_SECONDS) would never be asked, and a
            # revoked token, or one moved out of a group, would go on hearing.
            due = time.monotonic() - checked >= KEEPALIVE_SECONDS
            # After missed changes, a session that ended meanwhile may not have been heard.
            if due or news is None or news.missed:
                if not await _signed_in(still_signed_in):
                    yield sse({}, kind="signed-out")
                    return
                checked = time.monotonic()
            if news is None:
                yield b": keepalive\n\n"
                continue
            if news.missed:
                yield sse({}, kind="resync")
            for event in news.events:
                yield sse(event.to_json(), kind="request")
    finally:
        feed.close()


async def _signed_in(still_signed_in: StillSignedIn) -> bool:
    try:
        return await still_signed_in()
    except DatabaseUnavailable:
        # The client reconnects (retry: 3000) and is asked again then.
        return False


async def open_stream(
    engine: Engine,
    principal: Principal,
    still_signed_in: StillSignedIn,
    *,
    session_id: str | None = None,
) -> StreamingResponse:
    """The response of one stream for ``principal``. Subscribed before the response starts,
    so a database that is gone answers 503, not a stream cut short; ``session_id``: the web
    session whose end closes the stream at once."""
    rules = engine.rules

    def wants(event: RequestEvent) -> bool:
        return hears(rules, principal, event)

    feed = await engine.request_streams.subscribe(
        wants, session_id=session_id, owner=principal.id, limit=MAX_STREAMS_PER_PRINCIPAL
    )
    if feed is None:
        raise ApiError(
            429,
            "too_many_streams",
            f"you already follow the requests on {MAX_STREAMS_PER_PRINCIPAL} streams here;"
            " close one first",
        )
    return StreamingResponse(
        request_events(feed, still_signed_in),
        media_type="text/event-stream",
        # Proxies must pass each event on as it comes.
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
