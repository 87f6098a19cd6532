"""The notification channels: where a notice that a call waits goes. One module per channel
(``webhook``: signed outbound webhooks, ``slack``: a Slack-compatible incoming webhook,
``slack_app``: the Slack app, whose messages carry buttons that decide, ``smtp``: e-mail),
each a ``Channel`` (``channel``); ``channels_from_settings`` builds the ones
the settings configure. What a notice says and how it is signed, the pure part, is
``approvals.notify``; the loop that claims what is owed and feeds the channels is
``web.notifier``.

A new channel is a module here and its lines in ``channels_from_settings``.
"""

from __future__ import annotations

from approvals.errors import ConfigurationError
from storage.db import Database
from web.channels.channel import Channel, Outcome
from web.channels.slack import SlackChannel
from web.channels.slack_app import SlackAppChannel, slack_channel
from web.channels.smtp import EmailChannel, EmailLinks, LinkDesk, SmtpServer
from web.channels.webhook import WebhookChannel
from web.settings import Settings

__all__ = [
    "Channel",
    "EmailChannel",
    "EmailLinks",
    "LinkDesk",
    "Outcome",
    "SlackAppChannel",
    "SlackChannel",
    "SmtpServer",
    "WebhookChannel",
    "channels_from_settings",
]


def channels_from_settings(
    settings: Settings, desk: LinkDesk | None = None, db: Database | None = None
) -> list[Channel]:
    """The configured channels; none configured, none returned (and nothing is sent).
    ``desk``: the e-mail channel's one-time links (none: its e-mail carries none); ``db``:
    where the Slack app reads requests and records its messages (none: no Slack app
    channel)."""
    channels: list[Channel] = [
        WebhookChannel.from_target(w, legacy_signature=settings.webhook_legacy_signature)
        for w in settings.notify_webhooks
    ]
    if settings.notify_slack_webhook is not None:
        channels.append(SlackChannel(settings.notify_slack_webhook.get_secret_value()))
    slack_app = slack_channel(settings, db)
    if slack_app is not None:
        channels.append(slack_app)
    personal = desk is not None and bool(desk.addresses)
    if settings.notify_smtp_host and (
        settings.notify_smtp_to or settings.notify_smtp_group_to or personal
    ):
        server = SmtpServer(
            host=settings.notify_smtp_host,
            port=settings.notify_smtp_port,
            sender=settings.notify_smtp_from,
            starttls=settings.notify_smtp_starttls,
            user=settings.notify_smtp_user,
            password=(
                settings.notify_smtp_password.get_secret_value()
                if settings.notify_smtp_password
                else None
            ),
            timeout=settings.notify_timeout_seconds,
        )
        channels.append(
            EmailChannel(
                server,
                to=settings.notify_smtp_to,
                group_to=settings.notify_smtp_group_to,
                desk=desk if personal else None,
            )
        )
    names = [c.name for c in channels]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"notification channels need distinct names: {names}")
    return channels
