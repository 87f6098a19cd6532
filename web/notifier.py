"""Telling people a call waits for them: the notifier loop that feeds the channels
(``web.channels``: signed webhooks, a Slack-compatible incoming webhook, the Slack app, e-mail
over SMTP). What a notice says and how it is signed, the pure part, is ``approvals.notify``.

The same poll updates the Slack app's posted messages once their request no longer waits for
them, by whatever route it ended (``SlackAppChannel.claim_updates``): the state is read from
the tables, not from the request events' NOTIFY, so an update owed while no worker listened
(a restart, a dropped connection) is still made; retries, backoff and leases as for a post.

The notifier polls with one statement that claims what is owed (see ``claim_notifications``):
a delivery per (request, channel, escalation level), inserted by exactly one worker, so several
workers never send the same notification twice. A worker that dies between sending and
recording leaves the delivery leased; once the lease lapses another worker sends it again
(at least once, in that one case). Receivers can drop such repeats by ``X-Approvals-Delivery``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Sequence

import httpx

from approvals.authz import ApproverRules
from approvals.errors import DatabaseUnavailable
from approvals.notify import DeliveryStatus, Notice, RunNotice, backoff_seconds
from storage.db import Database
from storage.notifications import PgNotifications
from storage.run_events import PgRunEvents
from storage.slack_messages import OwedUpdate
from web.channels import (
    Channel,
    EmailLinks,
    LinkDesk,
    Outcome,
    SlackAppChannel,
    WebhookChannel,
    channels_from_settings,
)
from web.security import secret_key
from web.settings import Settings, revealed

log = logging.getLogger("approvals.notify")


def email_link_desk(db: Database, settings: Settings) -> LinkDesk:
    """What one-time e-mail links need, on ``db``: signed under the app's secret (the one
    that signs its sessions), checked by the approver rules the web applies."""
    links = EmailLinks(
        secret_key(revealed(settings.secret_key), settings.data_dir),
        public_url=settings.public_url,
        max_seconds=settings.email_link_seconds,
    )
    rules = ApproverRules(
        default_group=settings.default_approver_group, operator_group=settings.operator_group
    )
    return LinkDesk.on(db, links, dict(settings.notify_smtp_accounts), rules)


USER_AGENT = "approvals-notifier/1"
MAX_POLL_BACKOFF = 30.0


class Notifier:
    """Sends the notifications owed to pending requests, and retries failed ones."""

    def __init__(
        self,
        store: PgNotifications,
        channels: Sequence[Channel],
        *,
        public_url: str,
        default_group: str,
        max_attempts: int = 6,
        backoff_base: float = 10.0,
        backoff_max: float = 3600.0,
        timeout: float = 10.0,
        poll_interval: float = 2.0,
        batch: int = 32,
        runs: PgRunEvents | None = None,
    ) -> None:
        self._store = store
        self._runs = runs
        #: The one-time e-mail links' desk (``web.faces.email_links`` reads links with it).
        self.email_links: LinkDesk | None = None
        self._channels = {c.name: c for c in channels}
        # Runs are told to webhooks only: they are for programs waiting on a run, not people.
        self._webhooks = {c.name: c for c in channels if isinstance(c, WebhookChannel)}
        # The Slack app's posted messages are updated once their request no longer waits.
        self._slack_apps = [c for c in channels if isinstance(c, SlackAppChannel)]
        self._public_url = public_url
        self._default_group = default_group
        self._max_attempts = max_attempts
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max
        self._timeout = timeout
        self._poll_interval = poll_interval
        self._batch = batch
        # Longer than one attempt may take (``_attempt_limit``), so a live sender's lease never
        # lapses and another worker never sends the same notice meanwhile.
        self._lease = max(60.0, 6 * timeout)
        # The whole of one attempt, not each read: ``timeout`` bounds every read, and a
        # receiver answering a byte every half second held an attempt past the lease.
        self._attempt_limit = self._lease / 2

    @classmethod
    def from_settings(
        cls,
        store: PgNotifications,
        settings: Settings,
        runs: PgRunEvents | None = None,
        *,
        db: Database | None = None,
    ) -> Notifier:
        """The notifier the settings configure. ``db``: the database the one-time e-mail
        links check accounts and requests in and audit their use in (without it, e-mails
        carry no links and ``email_links`` is ``None``), and the Slack app reads requests
        and records its messages in (without it, no Slack app channel)."""
        desk = email_link_desk(db, settings) if db is not None else None
        notifier = cls(
            store,
            channels_from_settings(settings, desk, db),
            public_url=settings.public_url,
            default_group=settings.default_approver_group,
            max_attempts=settings.notify_max_attempts,
            backoff_base=settings.notify_backoff_seconds,
            backoff_max=settings.notify_backoff_max_seconds,
            timeout=settings.notify_timeout_seconds,
            poll_interval=settings.notify_poll_seconds,
            runs=runs,
        )
        notifier.email_links = desk
        return notifier

    @property
    def enabled(self) -> bool:
        return bool(self._channels)

    async def run_once(self) -> int:
        """Claim and send one batch; the number of attempts made."""
        rows = await self._store.claim(
            list(self._channels), limit=self._batch, lease_seconds=self._lease
        )
        run_rows = (
            await self._runs.claim_notifications(
                list(self._webhooks), limit=self._batch, lease_seconds=self._lease
            )
            if self._runs is not None
            else []
        )
        updates: list[tuple[SlackAppChannel, OwedUpdate]] = []
        for app in self._slack_apps:
            owed = await app.claim_updates(limit=self._batch, lease_seconds=self._lease)
            updates.extend((app, o) for o in owed)
        if not rows and not run_rows and not updates:
            return 0
        notices = [
            Notice.from_row(r, public_url=self._public_url, default_group=self._default_group)
            for r in rows
        ]
        run_notices = [RunNotice.from_row(r, public_url=self._public_url) for r in run_rows]
        async with httpx.AsyncClient(
            timeout=self._timeout, headers={"User-Agent": USER_AGENT}, follow_redirects=False
        ) as client:
            await asyncio.gather(
                *(self._deliver(n, client) for n in notices),
                *(self._deliver_run(n, client) for n in run_notices),
                *(self._deliver_update(app, o, client) for app, o in updates),
            )
        return len(notices) + len(run_notices) + len(updates)

    async def _attempt(self, sending: Awaitable[Outcome], what: str) -> Outcome:
        """One delivery attempt, bounded as a whole; a channel that fails is retried (a bug in
        one must not stop the others)."""
        try:
            return await asyncio.wait_for(sending, self._attempt_limit)
        except TimeoutError:
            error = f"no complete answer within {self._attempt_limit:.0f}s"
            return Outcome(DeliveryStatus.RETRY, error=error)
        except Exception as exc:
            log.exception("%s failed", what)
            return Outcome(DeliveryStatus.RETRY, error=f"{type(exc).__name__}: {exc}"[:300])

    def _settled(self, outcome: Outcome, attempt: int) -> tuple[Outcome, float]:
        """What a delivery attempt comes to: a retry past the last attempt gives up, any other
        retry waits its backoff (seconds)."""
        if outcome.status is not DeliveryStatus.RETRY:
            return outcome, 0.0
        if attempt >= self._max_attempts:
            gave_up = f"gave up after {attempt} attempts: {outcome.error}"
            return Outcome(DeliveryStatus.FAILED, outcome.response_code, gave_up), 0.0
        return outcome, backoff_seconds(attempt, base=self._backoff_base, cap=self._backoff_max)

    async def _deliver_run(self, notice: RunNotice, client: httpx.AsyncClient) -> None:
        assert self._runs is not None
        outcome = await self._attempt(
            self._webhooks[notice.channel].send_run(notice, client),
            f"run notification {notice.delivery_header}",
        )
        outcome, retry_in = self._settled(outcome, notice.attempt)
        level = log.info if outcome.status is DeliveryStatus.SENT else log.warning
        level(
            "run notification %s (%s, run %s %s) attempt %s: %s%s",
            notice.delivery_header,
            notice.channel,
            notice.run_id,
            notice.status,
            notice.attempt,
            outcome.status.value,
            f" ({outcome.error})" if outcome.error else "",
        )
        await self._runs.record_notification(
            notice.delivery_id,
            notice.attempt,
            outcome.status,
            error=outcome.error,
            retry_in=retry_in,
        )

    async def _deliver_update(
        self, app: SlackAppChannel, owed: OwedUpdate, client: httpx.AsyncClient
    ) -> None:
        """Update one posted Slack message, retried as a post is."""
        outcome = await self._attempt(
            app.update(owed, client), f"Slack message update {owed.id} ({owed.channel})"
        )
        outcome, retry_in = self._settled(outcome, owed.attempt)
        level = log.info if outcome.status is DeliveryStatus.SENT else log.warning
        level(
            "Slack message %s (request %s, channel %s, ts %s) update attempt %s: %s%s",
            owed.id,
            owed.request_id,
            owed.channel,
            owed.ts,
            owed.attempt,
            outcome.status.value,
            f" ({outcome.error})" if outcome.error else "",
        )
        if not await app.record_update(owed, outcome, retry_in):
            log.warning(
                "Slack message %s: lease lapsed during attempt %s; another worker holds it",
                owed.id,
                owed.attempt,
            )

    async def _deliver(self, notice: Notice, client: httpx.AsyncClient) -> None:
        channel = self._channels[notice.channel]
        outcome = await self._attempt(
            channel.send(notice, client),
            f"notification {notice.delivery_id} on {notice.channel}",
        )
        outcome, retry_in = self._settled(outcome, notice.attempt)
        level = log.info if outcome.status is DeliveryStatus.SENT else log.warning
        level(
            "notification %s (%s, request %s, level %s) attempt %s: %s%s",
            notice.delivery_id,
            notice.channel,
            notice.request_id,
            notice.escalation_level,
            notice.attempt,
            outcome.status.value,
            f" ({outcome.error})" if outcome.error else "",
        )
        settled = await self._store.record(
            notice.delivery_id,
            notice.attempt,
            outcome.status,
            response_code=outcome.response_code,
            error=outcome.error,
            retry_in=retry_in,
        )
        if not settled:
            log.warning(
                "notification %s: lease lapsed during attempt %s; another worker holds it",
                notice.delivery_id,
                notice.attempt,
            )

    async def run(self, stop: asyncio.Event) -> None:
        """Poll and send until ``stop`` is set. Returns at once when no channel is configured."""
        if not self.enabled:
            return
        log.info("notifier: sending to %s", ", ".join(self._channels))
        backoff = self._poll_interval
        while not stop.is_set():
            try:
                sent = await self.run_once()
                backoff = self._poll_interval
            except DatabaseUnavailable as exc:
                log.error("notifier: %s; retrying in %.0fs", exc, backoff)
                sent = 0
                backoff = min(backoff * 2, MAX_POLL_BACKOFF)
            except Exception:
                # Keep notifying whatever one pass tripped over; the claim's lease brings the
                # batch back.
                log.exception("notifier: pass failed; retrying in %.0fs", backoff)
                sent = 0
                backoff = min(backoff * 2, MAX_POLL_BACKOFF)
            if sent >= self._batch:
                continue  # more may be owed right now
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), backoff)
