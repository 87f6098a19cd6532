"""Outbound webhooks: a notice (or a run's notification) POSTed as JSON, signed with
HMAC-SHA256 (``approvals.notify``)."""

from __future__ import annotations

import httpx

from approvals.notify import (
    DELIVERY_HEADER,
    Notice,
    RunNotice,
    run_webhook_body,
    signature_headers,
    webhook_body,
)
from web.channels.channel import Outcome, post, url_label


class WebhookChannel:
    """POSTs the notice as JSON, signed with HMAC-SHA256 (see ``approvals.notify``)."""

    def __init__(self, url: str, secret: str, name: str | None = None) -> None:
        self._url = url
        self._secret = secret
        self.name = f"webhook:{name or url_label(url)}"

    async def send(self, notice: Notice, client: httpx.AsyncClient) -> Outcome:
        body = webhook_body(notice)
        headers = {
            "Content-Type": "application/json",
            DELIVERY_HEADER: str(notice.delivery_id),
            **signature_headers(self._secret, body),
        }
        return await post(client, self._url, body, headers)

    async def send_run(self, notice: RunNotice, client: httpx.AsyncClient) -> Outcome:
        """A run's notification, signed the same way."""
        body = run_webhook_body(notice)
        headers = {
            "Content-Type": "application/json",
            DELIVERY_HEADER: notice.delivery_header,
            **signature_headers(self._secret, body),
        }
        return await post(client, self._url, body, headers)
