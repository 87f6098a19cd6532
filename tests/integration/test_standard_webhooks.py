"""Outbound webhooks in the Standard Webhooks format, checked by the ``standardwebhooks``
library itself on what a real receiver on loopback was sent: every secret active at once
verifies (rotation without a gap), a removed one no longer does, the id is the same on every
attempt of a delivery, and the old header is kept (or dropped) by a setting."""

from __future__ import annotations

import base64
import secrets
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from approvals.notify import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify_signature
from tests.integration.helpers import start_refund
from tests.integration.receivers import HttpReceiver, Received, http_receiver
from tests.integration.test_notifications import PUBLIC_URL, escalate, pass_until
from web.channels.webhook import whsec_of
from web.engine import Engine
from web.notifier import Notifier
from web.settings import Settings, WebhookTarget

OLD_STYLE = "an-old-style-webhook-secret"


def whsec() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def notifier(engine: Engine, settings: Settings, hook: HttpReceiver, **target: Any) -> Notifier:
    legacy = target.pop("legacy", True)
    configured = settings.model_copy(
        update={
            "public_url": PUBLIC_URL,
            "notify_backoff_seconds": 0.2,
            "notify_webhooks": [WebhookTarget(url=hook.url, name="ops", **target)],
            "webhook_legacy_signature": legacy,
        }
    )
    return Notifier.from_settings(engine.notifications, configured)


def verifies(secret: str, received: Received) -> bool:
    try:
        Webhook(secret).verify(received.body, received.headers)
    except WebhookVerificationError:
        return False
    return True


async def test_a_delivery_verifies_with_the_standardwebhooks_library(
    engine: Engine, settings: Settings
) -> None:
    secret = whsec()
    with http_receiver() as hook:
        sending = notifier(engine, settings, hook, secrets=[SecretStr(secret)])
        outcome = await start_refund(engine)
        assert await sending.run_once() == 1

    got = hook.requests[0]
    body = Webhook(secret).verify(got.body, got.headers)
    assert body["event"] == "request.waiting"
    assert body["request_id"] == outcome.pending[0]
    assert got.headers["webhook-id"] == f"request-{body['delivery_id']}"
    assert got.headers["webhook-signature"].startswith("v1,")
    assert not verifies(whsec(), got)
    # Configured with Standard Webhooks secrets only, there is no old-style secret to sign the
    # old header with.
    assert SIGNATURE_HEADER not in got.headers


async def test_two_active_secrets_each_verify_and_a_removed_one_no_longer_does(
    engine: Engine, settings: Settings
) -> None:
    old, new = whsec(), whsec()
    with http_receiver() as hook:
        rotating = notifier(engine, settings, hook, secrets=[SecretStr(old), SecretStr(new)])
        request_id = (await start_refund(engine)).pending[0]
        assert await rotating.run_once() == 1

        # Rotation done: the old secret is removed; the next delivery (an escalation) is
        # signed with the new one only.
        rotated = notifier(engine, settings, hook, secrets=[SecretStr(new)])
        await escalate(engine, request_id, "finance")
        assert await rotated.run_once() == 1

    during, after = hook.requests
    assert len(during.headers["webhook-signature"].split(" ")) == 2
    assert verifies(old, during)
    assert verifies(new, during)
    assert not verifies(old, after)
    assert verifies(new, after)


async def test_the_webhook_id_is_the_same_on_every_attempt_of_a_delivery(
    engine: Engine, settings: Settings
) -> None:
    secret = whsec()
    with http_receiver(fail_first=2, fail_status=503) as hook:
        sending = notifier(engine, settings, hook, secrets=[SecretStr(secret)])
        await start_refund(engine)
        await start_refund(engine)
        # Each delivery's first attempt is answered 503, its second 200.
        await pass_until(sending, lambda: len(hook.requests) == 4)

    ids = [r.headers["webhook-id"] for r in hook.requests]
    assert len(set(ids)) == 2, ids
    assert sorted(ids.count(i) for i in set(ids)) == [2, 2]
    assert all(verifies(secret, r) for r in hook.requests)


async def test_an_old_style_secret_signs_both_ways_until_the_legacy_setting_is_off(
    engine: Engine, settings: Settings
) -> None:
    with http_receiver() as hook:
        both = notifier(engine, settings, hook, secret=SecretStr(OLD_STYLE))
        request_id = (await start_refund(engine)).pending[0]
        assert await both.run_once() == 1
        standard_only = notifier(engine, settings, hook, secret=SecretStr(OLD_STYLE), legacy=False)
        await escalate(engine, request_id, "finance")
        assert await standard_only.run_once() == 1

    first, second = hook.requests
    for got in (first, second):
        assert verifies(whsec_of(OLD_STYLE), got)
    assert verify_signature(
        OLD_STYLE, first.headers[TIMESTAMP_HEADER], first.body, first.headers[SIGNATURE_HEADER]
    )
    assert SIGNATURE_HEADER not in second.headers
    assert TIMESTAMP_HEADER not in second.headers


def test_a_webhook_needs_a_secret_and_standard_secrets_must_be_whsec() -> None:
    with pytest.raises(ValidationError, match="secret"):
        WebhookTarget(url="https://hooks.example.com/a")
    with pytest.raises(ValidationError, match="whsec_"):
        WebhookTarget(url="https://hooks.example.com/a", secrets=[SecretStr("plain-secret-x")])
    short = "whsec_" + base64.b64encode(b"short").decode()
    with pytest.raises(ValidationError, match="16 bytes"):
        WebhookTarget(url="https://hooks.example.com/a", secrets=[SecretStr(short)])
