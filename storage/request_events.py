"""Approval requests' changes, pushed: one LISTEN connection per process, fanned out to feeds.

Migration 0020 NOTIFYs ``approvals_request_events`` whenever a request is opened, decided,
expired, escalated, superseded or cancelled, with what a listener needs to tell who may hear of
it (its approver groups, its run's starter), and ``approvals_sessions_ended`` with the hash of
each web session that ends. ``RequestEventHub`` holds the one connection that LISTENs on both
and hands each change to the feeds whose filter takes it: the database does the same work
whether one client or a thousand follow the requests, and no client ever asks it anything.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, overload

import psycopg

from approvals.errors import DatabaseUnavailable
from storage.db import Database, Row, sql
from storage.listening import Listener
from storage.sessions import session_hash

log = logging.getLogger("approvals.request_events")

#: The NOTIFY channel of request changes; the payload is a JSON object (migration 0020).
REQUESTS_CHANNEL = "approvals_request_events"
#: The NOTIFY channel of ended web sessions; the payload is the hash of the session's id.
SESSIONS_CHANNEL = "approvals_sessions_ended"


class RequestEventKind(enum.StrEnum):
    """What happened to a request."""

    OPENED = "opened"
    #: Approved, rejected, or answered in the tool's place.
    DECIDED = "decided"
    EXPIRED = "expired"
    #: Its deadline passed and it moved to the next approvers of its chain.
    ESCALATED = "escalated"
    #: The call's arguments changed: a new request replaces it.
    SUPERSEDED = "superseded"
    #: Its run was cancelled.
    CANCELLED = "cancelled"


@dataclass(frozen=True, kw_only=True, slots=True)
class RequestEvent:
    """One change of one request, with whom it concerns (never what the request shows)."""

    id: str
    run_id: str
    tool: str
    kind: RequestEventKind
    status: str
    #: The approver groups the request names now (empty: the default group).
    approvers: frozenset[str]
    #: For an escalation, the groups it named before (they could see it until now).
    from_approvers: frozenset[str] = field(default_factory=frozenset)
    #: Who started the request's run, and the person that principal acts for.
    requested_by: str
    requested_by_person: str | None = None

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> RequestEvent:
        """The event a NOTIFY payload describes (``KeyError``/``ValueError`` if malformed)."""
        return cls(
            id=str(data["id"]),
            run_id=str(data["run_id"]),
            tool=str(data["tool"]),
            kind=RequestEventKind(data["kind"]),
            status=str(data["status"]),
            approvers=frozenset(data.get("approvers") or ()),
            from_approvers=frozenset(data.get("from_approvers") or ()),
            requested_by=str(data["requested_by"]),
            requested_by_person=data.get("requested_by_person"),
        )

    def to_json(self) -> dict[str, Any]:
        """What a client is told: which request, of which run, what happened."""
        return {
            "id": self.id,
            "run_id": self.run_id,
            "tool": self.tool,
            "kind": self.kind.value,
            "status": self.status,
        }


@dataclass(frozen=True, slots=True)
class FeedNews:
    """What a feed got since the last look: the changes it takes, whether some may have been
    missed (the listening connection dropped, or the client fell too far behind: re-read the
    list), and whether its web session ended."""

    events: list[RequestEvent]
    missed: bool = False
    session_ended: bool = False


class RequestFeed:
    """One client's share of the changes (``RequestEventHub.subscribe``)."""

    def __init__(
        self,
        hub: RequestEventHub,
        wants: Callable[[RequestEvent], bool],
        session: str | None,
        backlog: int,
        owner: str | None = None,
    ) -> None:
        self._hub = hub
        self.wants = wants
        #: The hash of the web session this feed belongs to, if any.
        self.session = session
        #: Whose feed it is (``subscribe``'s ``owner``), if anyone's.
        self.owner = owner
        self._events: deque[RequestEvent] = deque()
        self._backlog = backlog
        self._missed = False
        self._ended = False
        self._woken = asyncio.Event()

    def push(self, event: RequestEvent) -> None:
        if len(self._events) >= self._backlog:
            # A client this far behind re-reads its list instead: memory stays bounded.
            self._events.clear()
            self._missed = True
        else:
            self._events.append(event)
        self._woken.set()

    def mark_missed(self) -> None:
        self._missed = True
        self._woken.set()

    def end_session(self) -> None:
        self._ended = True
        self._woken.set()

    async def wait(self, seconds: float) -> FeedNews | None:
        """What arrived (at once if something already had), or ``None`` after ``seconds``
        of nothing."""
        if not self._woken.is_set():
            try:
                await asyncio.wait_for(self._woken.wait(), seconds)
            except TimeoutError:
                return None
        self._woken.clear()
        news = FeedNews(list(self._events), self._missed, self._ended)
        self._events.clear()
        self._missed = False
        return news

    def close(self) -> None:
        self._hub.unsubscribe(self)


class RequestEventHub:
    """One connection per process LISTENing for request changes and ended sessions.

    Each change is parsed once and pushed to every feed whose filter takes it; an ended
    session ends the feeds that belong to it. If the connection drops, every feed is told it
    may have missed changes, and the hub connects again (every ``retry_seconds``)."""

    def __init__(
        self, url: str, db: Database, *, retry_seconds: float = 1.0, backlog: int = 1000
    ) -> None:
        self._db = db
        self._backlog = backlog
        self._feeds: set[RequestFeed] = set()
        self._by_session: dict[str, set[RequestFeed]] = {}
        self._by_owner: dict[str, int] = {}
        self._listener = Listener(
            url,
            (sql("listen_request_events"), sql("listen_sessions_ended")),
            on_notify=self._notified,
            on_lost=self._lost,
            name="request events",
            retry_seconds=retry_seconds,
        )
        #: Moves on with every change heard (and every connection lost): what is cached from
        #: the requests (the inbox's counts) is stale once it moved.
        self.generation = 0

    @property
    def feeds(self) -> int:
        """How many feeds are open in this process."""
        return len(self._feeds)

    def feeds_of(self, owner: str) -> int:
        """How many feeds ``owner`` holds open in this process."""
        return self._by_owner.get(owner, 0)

    @overload
    async def subscribe(
        self,
        wants: Callable[[RequestEvent], bool],
        *,
        session_id: str | None = None,
        owner: str | None = None,
        limit: None = None,
    ) -> RequestFeed: ...

    @overload
    async def subscribe(
        self,
        wants: Callable[[RequestEvent], bool],
        *,
        session_id: str | None = None,
        owner: str,
        limit: int,
    ) -> RequestFeed | None: ...

    async def subscribe(
        self,
        wants: Callable[[RequestEvent], bool],
        *,
        session_id: str | None = None,
        owner: str | None = None,
        limit: int | None = None,
    ) -> RequestFeed | None:
        """A feed of the changes ``wants`` takes, from now on; ``session_id``: the web session
        whose end ends the feed. ``None`` when ``owner`` already holds ``limit`` feeds (counted
        and taken in one step, so clients racing each other cannot pass it).
        ``DatabaseUnavailable`` when the hub cannot listen (so a request fails before its
        stream starts)."""
        await self._listener.start()
        # No await from here on: the count and the new feed are one step.
        if owner is not None and limit is not None and self.feeds_of(owner) >= limit:
            return None
        session = session_hash(session_id) if session_id is not None else None
        feed = RequestFeed(self, wants, session, self._backlog, owner)
        self._feeds.add(feed)
        if session is not None:
            self._by_session.setdefault(session, set()).add(feed)
        if owner is not None:
            self._by_owner[owner] = self.feeds_of(owner) + 1
        return feed

    def unsubscribe(self, feed: RequestFeed) -> None:
        if feed not in self._feeds:
            return
        self._feeds.discard(feed)
        if feed.owner is not None:
            left = self.feeds_of(feed.owner) - 1
            if left > 0:
                self._by_owner[feed.owner] = left
            else:
                self._by_owner.pop(feed.owner, None)
        if feed.session is not None:
            feeds = self._by_session.get(feed.session)
            if feeds is not None:
                feeds.discard(feed)
                if not feeds:
                    del self._by_session[feed.session]

    async def _notified(self, notify: psycopg.Notify) -> None:
        if notify.channel == SESSIONS_CHANNEL:
            for feed in list(self._by_session.get(notify.payload, ())):
                feed.end_session()
        else:
            await self._dispatch(notify.payload)

    def _lost(self) -> None:
        # What changed meanwhile was not heard: every feed re-reads.
        self.generation += 1
        for feed in list(self._feeds):
            feed.mark_missed()

    async def _dispatch(self, payload: str) -> None:
        self.generation += 1
        event = await self._event(payload)
        if event is None:
            return
        for feed in list(self._feeds):
            try:
                wanted = feed.wants(event)
            except Exception:
                # A filter that fails tells its client nothing (fail closed), and no one else
                # loses the event.
                log.exception("request events: a feed's filter failed")
                continue
            if wanted:
                feed.push(event)

    async def _event(self, payload: str) -> RequestEvent | None:
        try:
            data = json.loads(payload)
            if data.get("more"):
                # Too big for a NOTIFY (hundreds of approver groups): read the row, once for
                # every feed of this process.
                row = await self._row(str(data["id"]))
                if row is None:
                    return None
                data = {**row, "kind": data["kind"], "status": data["status"]}
            return RequestEvent.from_payload(data)
        except DatabaseUnavailable as exc:
            log.warning("request events: cannot read a change (%s)", exc)
            for feed in list(self._feeds):
                feed.mark_missed()
            return None
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("request events: dropped a change it could not read (%s)", exc)
            return None

    async def _row(self, request_id: str) -> Row | None:
        return await self._db.one("request_event_row", {"id": request_id})

    async def close(self) -> None:
        await self._listener.close()
