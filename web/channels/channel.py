"""What every channel is: somewhere a notice goes (``Channel``), and what one attempt to send
it came to (``Outcome``); and the HTTP POST the webhook-like channels share, which says which
answers are worth trying again."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

import httpx

from approvals.notify import DeliveryStatus, Notice

#: Statuses a receiver uses to say "later", not "never".
RETRYABLE_HTTP = frozenset({408, 425, 429})


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one attempt came to."""

    status: DeliveryStatus
    response_code: int | None = None
    error: str | None = None


class Channel(Protocol):
    """Somewhere notices go. ``name`` keys its deliveries, so it must be stable."""

    @property
    def name(self) -> str: ...

    async def send(self, notice: Notice, client: httpx.AsyncClient) -> Outcome: ...


def http_outcome(response: httpx.Response) -> Outcome:
    """What a receiver's answer comes to: sent, worth a retry, or failed for good."""
    code = response.status_code
    if 200 <= code < 300:
        return Outcome(DeliveryStatus.SENT, code)
    error = f"HTTP {code}: {response.text[:200]}".strip()
    if code >= 500 or code in RETRYABLE_HTTP:
        return Outcome(DeliveryStatus.RETRY, code, error)
    # Other 4xx (and redirects, which a webhook should not answer): repeating will not help.
    return Outcome(DeliveryStatus.FAILED, code, error)


async def post(
    client: httpx.AsyncClient, url: str, body: bytes, headers: dict[str, str]
) -> Outcome:
    """POST ``body`` to ``url``; a timeout or a transport failure is worth a retry."""
    try:
        response = await client.post(url, content=body, headers=headers)
    except httpx.TimeoutException as exc:
        return Outcome(DeliveryStatus.RETRY, error=f"timeout: {type(exc).__name__}")
    except httpx.TransportError as exc:
        return Outcome(DeliveryStatus.RETRY, error=f"{type(exc).__name__}: {exc}"[:300])
    return http_outcome(response)


def url_label(url: str) -> str:
    """How logs and delivery keys name ``url``: its host and a digest."""
    # The URL itself may hold a token (Slack's do): the log keeps its host and a digest.
    digest = hashlib.sha256(url.encode()).hexdigest()[:10]
    return f"{urlsplit(url).hostname or 'unknown'}#{digest}"
