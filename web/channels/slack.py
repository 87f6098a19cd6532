"""Slack: a notice posted to a Slack-compatible incoming webhook."""

from __future__ import annotations

import json

import httpx

from approvals.notify import Notice, slack_message
from web.channels.channel import Outcome, post


class SlackChannel:
    """Posts ``{"text": ...}`` to a Slack-compatible incoming webhook."""

    name = "slack"

    def __init__(self, url: str) -> None:
        self._url = url

    async def send(self, notice: Notice, client: httpx.AsyncClient) -> Outcome:
        body = json.dumps(slack_message(notice)).encode()
        return await post(client, self._url, body, {"Content-Type": "application/json"})
