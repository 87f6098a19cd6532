"""What the engine holds: the adapters ``open_engine`` builds once (``Adapters``), and the
event hubs, each one LISTEN connection made on first use (``EventHubs``).

The use cases (``web.engine.decide``, ``.runs``, ``.reads``, ``.edits``) take what they need
from here; the faces reach it only through ``web.engine.Engine``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from approvals.authz import ApproverRules
from storage.accounts import PgAccounts
from storage.audit import PgAuditLog
from storage.db import Database
from storage.expiry import PgExpiry
from storage.notifications import PgNotifications
from storage.ops import PgOperations
from storage.queue import PgResumeQueue
from storage.request_events import RequestEventHub
from storage.requests import PgApprovalRequests, PgDecisions
from storage.run_events import PgRunEvents, RunEventHub
from storage.runs import PgRuns, PgToolLedger
from storage.sessions import PgSessions
from storage.sign_ins import PgSignInCounts
from web.notifier import Notifier
from web.settings import Settings


@dataclass(frozen=True, kw_only=True)
class Adapters:
    """The engine's adapters, built once by ``build_adapters`` (for ``open_engine``)."""

    url: str
    settings: Settings
    db: Database
    rules: ApproverRules
    audit: PgAuditLog
    requests: PgApprovalRequests
    decisions: PgDecisions
    runs: PgRuns
    ledger: PgToolLedger
    queue: PgResumeQueue
    accounts: PgAccounts
    #: Cancels runs, prunes old ones, reads metrics and the schema's state.
    operations: PgOperations
    #: Expires (or escalates) requests past their deadline; run by ``work`` and ``drain``.
    expiry: PgExpiry
    #: Request notifications' deliveries and attempts.
    notifications: PgNotifications
    #: The web app's server-side sessions.
    sessions: PgSessions
    #: What runs' steps produced, for streams and run notifications.
    run_events: PgRunEvents
    #: Tells people when calls wait or are escalated; run by the worker processes.
    notifier: Notifier
    #: Failed password sign-ins, counted for every web process alike, with the limits each
    #: process's own count has (web.app).
    sign_ins: PgSignInCounts


def build_adapters(url: str, settings: Settings, db: Database) -> Adapters:
    """Every adapter on ``db`` (the pool at ``url``), configured by ``settings``."""
    run_events = PgRunEvents(db)
    notifications = PgNotifications(db)
    attempts = settings.login_attempts
    return Adapters(
        url=url,
        settings=settings,
        db=db,
        rules=ApproverRules(
            default_group=settings.default_approver_group,
            operator_group=settings.operator_group,
        ),
        audit=PgAuditLog(db),
        requests=PgApprovalRequests(db),
        decisions=PgDecisions(db),
        runs=PgRuns(db),
        ledger=PgToolLedger(db),
        queue=PgResumeQueue(db, url),
        accounts=PgAccounts(db),
        operations=PgOperations(db),
        expiry=PgExpiry(db),
        notifications=notifications,
        sessions=PgSessions(db),
        run_events=run_events,
        notifier=Notifier.from_settings(notifications, settings, run_events, db=db),
        sign_ins=PgSignInCounts(
            db,
            attempts=attempts,
            window=settings.login_window_seconds,
            account_attempts=settings.login_account_attempts or attempts * 4,
        ),
    )


class EventHubs:
    """This process's event hubs, each on one LISTEN connection made on first use."""

    def __init__(self, url: str, db: Database) -> None:
        self._url = url
        self._db = db

    @cached_property
    def runs(self) -> RunEventHub:
        """Wakes this process's run event streams."""
        return RunEventHub(self._url)

    @cached_property
    def requests(self) -> RequestEventHub:
        """Feeds this process's request streams (live views, ``GET /api/v1/pending/events``)."""
        return RequestEventHub(self._url, self._db)

    @property
    def requests_generation(self) -> int:
        """The request hub's generation (``RequestEventHub.generation``); 0 while no live view
        made this process listen."""
        return self.requests.generation if "requests" in vars(self) else 0

    async def close(self) -> None:
        """Close the hubs a stream made listen (only those)."""
        if "runs" in vars(self):
            await self.runs.close()
        if "requests" in vars(self):
            await self.requests.close()
