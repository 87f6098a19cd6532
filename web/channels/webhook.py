"""Outbound webhooks: a notice (or a run's notification) POSTed as JSON and signed in the
Standard Webhooks format (https://www.standardwebhooks.com/):

- ``webhook-id``: the delivery (``request-42``, ``run-7``), the same on every attempt of it,
  so a receiver drops repeats by it;
- ``webhook-timestamp``: the attempt's unix time, in seconds;
- ``webhook-signature``: ``v1,`` and the base64 HMAC-SHA256 of ``{id}.{timestamp}.{body}``,
  once per active secret, space-separated: while a secret is rotated both are active, and a
  receiver holding either verifies the delivery.

For one release, the old headers (``X-Approvals-Timestamp``, ``X-Approvals-Signature``, see
``approvals.notify``) are sent beside them when ``webhook_legacy_signature`` is on.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Sequence

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
from web.settings import WHSEC_PREFIX, WebhookTarget, whsec_key

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"


def whsec_of(secret: str) -> str:
    """The ``whsec_`` form of an old-style secret: the key is its UTF-8 bytes. A receiver
    verifies the Standard Webhooks signature of a webhook configured with only ``secret`` by
    this value."""
    return WHSEC_PREFIX + base64.b64encode(secret.encode()).decode()


def standard_signature(key: bytes, message_id: str, timestamp: str, body: bytes) -> str:
    """One ``v1,<base64>`` signature: HMAC-SHA256 under ``key`` of ``{id}.{timestamp}.{body}``."""
    signed = message_id.encode() + b"." + timestamp.encode() + b"." + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def standard_headers(
    keys: Sequence[bytes], message_id: str, body: bytes, *, now: float | None = None
) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt, signed with every key in ``keys``."""
    if not keys:
        raise ValueError("a webhook needs at least one key to sign with")
    timestamp = str(int(time.time() if now is None else now))
    signatures = " ".join(standard_signature(k, message_id, timestamp, body) for k in keys)
    return {ID_HEADER: message_id, TIMESTAMP_HEADER: timestamp, SIGNATURE_HEADER: signatures}


class WebhookChannel:
    """POSTs the notice as JSON, signed in the Standard Webhooks format (this module's
    docstring), and the old way too while ``legacy_secret`` is given."""

    def __init__(
        self,
        url: str,
        keys: Sequence[bytes],
        name: str | None = None,
        *,
        legacy_secret: str | None = None,
    ) -> None:
        if not keys:
            raise ValueError("a webhook needs at least one key to sign with")
        self._url = url
        self._keys = tuple(keys)
        self._legacy_secret = legacy_secret
        self.name = f"webhook:{name or url_label(url)}"

    @classmethod
    def from_target(cls, target: WebhookTarget, *, legacy_signature: bool) -> WebhookChannel:
        """The channel a configured webhook describes: its ``secrets`` sign (or, without any,
        its ``secret``); its ``secret`` also signs the old header while ``legacy_signature``."""
        secret = target.secret.get_secret_value() if target.secret is not None else None
        keys = [whsec_key(s.get_secret_value()) for s in target.secrets]
        if not keys and secret is not None:
            keys = [secret.encode()]
        return cls(
            target.url,
            keys,
            target.name,
            legacy_secret=secret if legacy_signature else None,
        )

    def headers(self, message_id: str, delivery: str, body: bytes) -> dict[str, str]:
        """Every header of one attempt."""
        headers = {
            "Content-Type": "application/json",
            DELIVERY_HEADER: delivery,
            **standard_headers(self._keys, message_id, body),
        }
        if self._legacy_secret is not None:
            headers |= signature_headers(self._legacy_secret, body)
        return headers

    async def send(self, notice: Notice, client: httpx.AsyncClient) -> Outcome:
        body = webhook_body(notice)
        headers = self.headers(f"request-{notice.delivery_id}", str(notice.delivery_id), body)
        return await post(client, self._url, body, headers)

    async def send_run(self, notice: RunNotice, client: httpx.AsyncClient) -> Outcome:
        """A run's notification, signed the same way."""
        body = run_webhook_body(notice)
        headers = self.headers(notice.delivery_header, notice.delivery_header, body)
        return await post(client, self._url, body, headers)
