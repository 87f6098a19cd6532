"""E-mail: a plain-text message to the request's approver groups, over SMTP."""

from __future__ import annotations

import asyncio
import smtplib
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from email.message import EmailMessage

import httpx

from approvals.notify import DeliveryStatus, Notice, email_message
from web.channels.channel import Outcome


@dataclass(frozen=True, kw_only=True)
class SmtpServer:
    host: str
    port: int
    sender: str
    starttls: bool = False
    user: str | None = None
    password: str | None = None
    timeout: float = 10.0


class EmailChannel:
    """Sends a plain-text e-mail over SMTP (stdlib ``smtplib``, in a thread)."""

    name = "email"

    def __init__(
        self,
        server: SmtpServer,
        *,
        to: Sequence[str] = (),
        group_to: dict[str, list[str]] | None = None,
    ) -> None:
        self._server = server
        self._to = tuple(to)
        self._group_to = group_to or {}

    def recipients(self, groups: Sequence[str]) -> tuple[str, ...]:
        """The addresses of the request's approver groups, or the default ones."""
        chosen = [a for g in groups for a in self._group_to.get(g, [])]
        return tuple(dict.fromkeys(chosen or self._to))

    async def send(self, notice: Notice, client: httpx.AsyncClient) -> Outcome:
        recipients = self.recipients(notice.approver_groups)
        if not recipients:
            groups = ", ".join(notice.approver_groups)
            return Outcome(DeliveryStatus.SKIPPED, error=f"no address for groups {groups}")
        message = email_message(notice, sender=self._server.sender, recipients=recipients)
        try:
            await asyncio.to_thread(self._send, message, recipients)
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

    def _send(self, message: EmailMessage, recipients: tuple[str, ...]) -> None:
        s = self._server
        with smtplib.SMTP(s.host, s.port, timeout=s.timeout) as smtp:
            if s.starttls:
                smtp.starttls(context=ssl.create_default_context())
            if s.user is not None:
                smtp.login(s.user, s.password or "")
            smtp.send_message(message, from_addr=s.sender, to_addrs=list(recipients))
