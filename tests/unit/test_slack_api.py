"""What a call to Slack's Web API comes to, for the notification queue: Slack answers HTTP 200
with ``ok``; a rate limit or Slack's own failure is tried again, any other refusal is not."""

from __future__ import annotations

import json

import httpx
import pytest

from approvals.notify import DeliveryStatus
from web.channels.slack_app import SlackApi

API = SlackApi(url="https://slack.test/api/", token="xoxb-1")


def answering(status: int, body: object) -> httpx.AsyncClient:
    def handle(request: httpx.Request) -> httpx.Response:
        assert request.url == "https://slack.test/api/chat.postMessage"
        assert request.headers["authorization"] == "Bearer xoxb-1"
        assert json.loads(request.content) == {"channel": "C1"}
        return httpx.Response(status, content=json.dumps(body).encode())

    return httpx.AsyncClient(transport=httpx.MockTransport(handle))


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (200, {"ok": True, "ts": "1.2"}, DeliveryStatus.SENT),
        (200, {"ok": False, "error": "ratelimited"}, DeliveryStatus.RETRY),
        (200, {"ok": False, "error": "internal_error"}, DeliveryStatus.RETRY),
        (200, {"ok": False, "error": "channel_not_found"}, DeliveryStatus.FAILED),
        (200, {"ok": False, "error": "invalid_auth"}, DeliveryStatus.FAILED),
        (200, ["not", "an", "object"], DeliveryStatus.RETRY),
        (429, {"ok": False, "error": "ratelimited"}, DeliveryStatus.RETRY),
        (503, {}, DeliveryStatus.RETRY),
        (404, {}, DeliveryStatus.FAILED),
    ],
)
async def test_slacks_answer_says_sent_retry_or_failed(
    status: int, body: object, expected: DeliveryStatus
) -> None:
    async with answering(status, body) as client:
        answer = await API.call(client, "chat.postMessage", {"channel": "C1"})
    assert answer.outcome.status is expected
    assert answer.ok is (expected is DeliveryStatus.SENT)


async def test_a_dropped_connection_is_tried_again() -> None:
    def drop(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(drop)) as client:
        answer = await API.call(client, "chat.postMessage", {"channel": "C1"})
    assert answer.outcome.status is DeliveryStatus.RETRY
