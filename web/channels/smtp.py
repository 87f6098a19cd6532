"""E-mail: a plain-text message to the request's approver groups, over SMTP; and, to each local
account with an address of its own that may decide the request, a message of its own carrying
one-time decision links (``EmailLinks``).

A link is ``{public_url}/email-links/{token}``: the token is signed with itsdangerous under the
app's secret and names the request, the account, the decision and an expiry no later than the
request's. Opening it decides nothing (``web.faces.email_links`` shows a confirmation); the
confirmation's POST decides as that account, under every rule the web applies.
"""

from __future__ import annotations

import asyncio
import smtplib
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from typing import Any, Protocol

import httpx
from itsdangerous import BadSignature, URLSafeSerializer

from approvals.accounts import UserAccount
from approvals.authz import ApproverRules
from approvals.decision_kinds import DecisionKind
from approvals.model import PendingCall
from approvals.notify import DeliveryStatus, Notice, email_message
from approvals.principals import Principal
from approvals.states import RequestStatus
from storage.accounts import PgAccounts
from storage.db import Database
from storage.email_links import PgEmailLinks
from storage.requests import PgApprovalRequests
from web.channels.channel import Outcome

#: Where the links lead (``web.faces.email_links`` serves it).
LINK_PATH = "/email-links"


@dataclass(frozen=True, kw_only=True)
class SmtpServer:
    host: str
    port: int
    sender: str
    starttls: bool = False
    user: str | None = None
    password: str | None = None
    timeout: float = 10.0


@dataclass(frozen=True, kw_only=True, slots=True)
class LinkClaim:
    """What a link's token says: who may decide which request how, until when."""

    request_id: str
    account: str
    kind: DecisionKind
    #: Unix time after which the link is refused.
    expires: int

    def expired(self, now: float | None = None) -> bool:
        return (time.time() if now is None else now) >= self.expires


class EmailLinks:
    """Signs and reads the one-time links an e-mail carries (this module's docstring)."""

    SALT = "approvals.email-link.v1"

    def __init__(self, key: str, *, public_url: str, max_seconds: int) -> None:
        self._serializer = URLSafeSerializer(key, salt=self.SALT)
        self._public_url = public_url.rstrip("/")
        self._max_seconds = max_seconds

    def token(
        self,
        request_id: str,
        account: str,
        kind: DecisionKind,
        request_expires: datetime,
        *,
        now: float | None = None,
    ) -> str:
        """A link's token: valid for ``max_seconds`` at most, and never past the request's
        expiry."""
        start = time.time() if now is None else now
        expires = min(int(request_expires.timestamp()), int(start + self._max_seconds))
        return self._serializer.dumps(
            {"r": request_id, "a": account, "k": kind.value, "e": expires}
        )

    def url(self, token: str) -> str:
        return f"{self._public_url}{LINK_PATH}/{token}"

    def read(self, token: str) -> LinkClaim | None:
        """The token's claim; ``None`` for a token this app did not sign (or a malformed one)."""
        try:
            data: Any = self._serializer.loads(token)
        except BadSignature:
            return None
        try:
            return LinkClaim(
                request_id=str(data["r"]),
                account=str(data["a"]),
                kind=DecisionKind(data["k"]),
                expires=int(data["e"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


class AccountDirectory(Protocol):
    async def users(self) -> list[UserAccount]: ...


class RequestReader(Protocol):
    async def get(self, request_id: str) -> PendingCall | None: ...


@dataclass(frozen=True, kw_only=True)
class LinkDesk:
    """Everything one-time e-mail links need: the signer, the accounts' own addresses, the
    accounts and requests to check who may decide what, and the audit of their use. The
    e-mail channel writes the links; ``web.faces.email_links`` reads them (through
    ``Engine.notifier``)."""

    links: EmailLinks
    addresses: dict[str, str]
    accounts: AccountDirectory
    requests: RequestReader
    rules: ApproverRules
    audit: PgEmailLinks

    @classmethod
    def on(
        cls,
        db: Database,
        links: EmailLinks,
        addresses: dict[str, str],
        rules: ApproverRules,
    ) -> LinkDesk:
        """The desk on ``db`` (storage's accounts, requests and audit)."""
        return cls(
            links=links,
            addresses=addresses,
            accounts=PgAccounts(db),
            requests=PgApprovalRequests(db),
            rules=rules,
            audit=PgEmailLinks(db),
        )

    async def personal(self, notice: Notice) -> list[tuple[str, str, list[tuple[str, str]]]]:
        """For each enabled account with an address that may decide the request now: its
        name, its address and its links (decision, URL), one per decision the request offers
        by e-mail. Nothing for a request no longer pending."""
        request = await self.requests.get(notice.request_id)
        if request is None or request.status is not RequestStatus.PENDING:
            return []
        kinds = [r.kind for r in request.offered_rules if r.in_email]
        if not kinds:
            return []
        found = []
        for account in await self.accounts.users():
            address = self.addresses.get(account.name)
            if address is None or account.disabled:
                continue
            principal = Principal.local(account.name, account.groups)
            if not self.rules.may_decide(principal, request):
                continue
            links = [
                (
                    kind.value,
                    self.links.url(
                        self.links.token(request.id, account.name, kind, request.expires_at)
                    ),
                )
                for kind in kinds
            ]
            found.append((account.name, address, links))
        return found


def with_links(message: EmailMessage, links: list[tuple[str, str]]) -> EmailMessage:
    """``message`` with its one-time links appended."""
    lines = [
        "",
        "",
        "Or decide from this e-mail. Each link is yours alone and works once; it opens a page",
        "that asks you to confirm, and decides nothing until you do:",
        "",
        *(f"  {kind.capitalize()}: {url}" for kind, url in links),
    ]
    message.set_content(message.get_content().rstrip("\n") + "\n".join(lines) + "\n")
    return message


class EmailChannel:
    """Sends plain-text e-mail over SMTP (stdlib ``smtplib``, in a thread): one message to the
    request's group addresses, and one of its own, with its links, to each account ``desk``
    finds."""

    name = "email"

    def __init__(
        self,
        server: SmtpServer,
        *,
        to: Sequence[str] = (),
        group_to: dict[str, list[str]] | None = None,
        desk: LinkDesk | None = None,
    ) -> None:
        self._server = server
        self._to = tuple(to)
        self._group_to = group_to or {}
        self.desk = desk

    def recipients(self, groups: Sequence[str]) -> tuple[str, ...]:
        """The addresses of the request's approver groups, or the default ones."""
        chosen = [a for g in groups for a in self._group_to.get(g, [])]
        return tuple(dict.fromkeys(chosen or self._to))

    async def messages(self, notice: Notice) -> list[tuple[EmailMessage, tuple[str, ...]]]:
        """What one notice sends: each message and its envelope recipients."""
        sender = self._server.sender
        personal = await self.desk.personal(notice) if self.desk is not None else []
        own = {address for _, address, _ in personal}
        # An account's own address gets its own message, not the group's as well.
        shared = tuple(a for a in self.recipients(notice.approver_groups) if a not in own)
        messages = []
        if shared:
            messages.append((email_message(notice, sender=sender, recipients=shared), shared))
        for _, address, links in personal:
            message = email_message(notice, sender=sender, recipients=(address,))
            messages.append((with_links(message, links), (address,)))
        return messages

    async def send(self, notice: Notice, client: httpx.AsyncClient) -> Outcome:
        messages = await self.messages(notice)
        if not messages:
            groups = ", ".join(notice.approver_groups)
            return Outcome(DeliveryStatus.SKIPPED, error=f"no address for groups {groups}")
        try:
            await asyncio.to_thread(self._send, messages)
        except smtplib.SMTPRecipientsRefused as exc:
            codes = [code for code, _ in exc.recipients.values()]
            temporary = all(400 <= c < 500 for c in codes)
            status = DeliveryStatus.RETRY if temporary else DeliveryStatus.FAILED
            return Outcome(status, codes[0] if codes else None, f"recipients refused: {exc}")
        except smtplib.SMTPResponseException as exc:
            status = DeliveryStatus.RETRY if 400 <= exc.smtp_code < 500 else DeliveryStatus.FAILED
            return Outcome(status, exc.smtp_code, f"SMTP {exc.smtp_code}: {exc.smtp_error!r}")
        except (OSError, smtplib.SMTPException) as exc:
            # Connection refused or dropped, timeouts, TLS failures: the server may be back soon.
            return Outcome(DeliveryStatus.RETRY, error=f"{type(exc).__name__}: {exc}"[:300])
        return Outcome(DeliveryStatus.SENT, 250)

    def _send(self, messages: list[tuple[EmailMessage, tuple[str, ...]]]) -> None:
        s = self._server
        with smtplib.SMTP(s.host, s.port, timeout=s.timeout) as smtp:
            if s.starttls:
                smtp.starttls(context=ssl.create_default_context())
            if s.user is not None:
                smtp.login(s.user, s.password or "")
            for message, recipients in messages:
                smtp.send_message(message, from_addr=s.sender, to_addrs=list(recipients))
