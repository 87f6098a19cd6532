"""Slack users linked through an OpenID Connect claim (``APPROVALS_SLACK_OIDC_CLAIM``): a real
OpenID provider's ID token names the signing-in user's Slack user id, which links that Slack
user to the principal; its clicks then decide as that principal, with the groups of its newest
live web session (its last sign-in's), and decide nothing once its sessions have ended. Without
the setting, the claim links nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from approvals.model import RequestStatus
from tests.web.oidc_provider import RunningProvider, run_oidc_provider
from tests.web.test_slack_app import (
    SUPPORT_CHANNEL,
    Served,
    audited,
    click,
    served,
    status_of,
    waiting_refund,
)
from web.engine import Engine
from web.settings import Settings

CLAIM = "slack_user_id"


@pytest.fixture(scope="module")
def provider() -> Iterator[RunningProvider]:
    users = {
        "sam": {"preferred_username": "sam", "groups": ["support"], CLAIM: "U0SAM"},
        "fin": {"preferred_username": "fin", "groups": ["finance"], CLAIM: "U0FIN"},
        "odd": {"preferred_username": "odd", "groups": ["support"], CLAIM: "<!channel>"},
    }
    with run_oidc_provider(users) as running:
        yield running


def with_oidc(settings: Settings, provider: RunningProvider, claim: str | None) -> Settings:
    return settings.model_copy(
        update={
            "secret_key": "test-secret-key-" + "x" * 32,
            "oidc_issuer": provider.issuer,
            "oidc_client_id": "approvals",
            "oidc_client_secret": "approvals-client-secret",
            "slack_oidc_claim": claim,
        }
    )


async def oidc_sign_in(app: Served, sub: str) -> None:
    """Sign ``sub`` in through the provider, as a browser would."""
    async with httpx.AsyncClient(
        follow_redirects=False, timeout=10, headers={"origin": app.url}
    ) as browser:
        authorize = (await browser.get(f"{app.url}/login/oidc")).headers["location"]
        assert (await browser.get(authorize)).status_code == 200
        callback = (await browser.post(authorize, data={"sub": sub})).headers["location"]
        done = await browser.get(callback)
        assert done.status_code == 303, done.text


async def test_a_slack_user_linked_by_the_sign_in_claim_decides_with_its_groups(
    engine: Engine, settings: Settings, provider: RunningProvider
) -> None:
    sam = f"oidc:{provider.issuer}#sam"
    fin = f"oidc:{provider.issuer}#fin"
    async with served(engine, with_oidc(settings, provider, CLAIM)) as app:
        await oidc_sign_in(app, "sam")
        await oidc_sign_in(app, "fin")
        await oidc_sign_in(app, "odd")  # its claim is no Slack user id: nothing is linked
        assert await app.desk.links.oidc_principal_of("U0SAM") == (
            sam,
            "sam",
            frozenset({"support"}),
        )
        _, request_id, posted, ts = await waiting_refund(engine, app)
        # fin is in finance, not support: nothing is decided.
        assert (await app.post(click(posted, ts, "approvals.approve", "U0FIN"))).status_code == 200
        await app.slack.wait_for("chat.postEphemeral")
        assert await status_of(engine, request_id) is RequestStatus.PENDING

        assert (await app.post(click(posted, ts, "approvals.approve", "U0SAM"))).status_code == 200
        assert await status_of(engine, request_id) is RequestStatus.APPROVED
        (update,) = await app.slack.wait_for("chat.update")

    _, decision = await engine.requests.decision_of(request_id)
    assert decision is not None
    assert decision.principal == sam
    assert (update.body["channel"], update.body["ts"]) == (SUPPORT_CHANNEL, ts)
    assert update.body["blocks"][-1]["elements"][0]["text"].startswith("Approved by <@U0SAM> at ")
    assert await audited(engine, request_id) == [
        ("slack.refused", "not allowed", fin),
        ("slack.decided", None, sam),
    ]


async def test_a_click_after_the_sessions_ended_decides_nothing(
    engine: Engine, settings: Settings, provider: RunningProvider
) -> None:
    sam = f"oidc:{provider.issuer}#sam"
    async with served(engine, with_oidc(settings, provider, CLAIM)) as app:
        await oidc_sign_in(app, "sam")
        _, request_id, posted, ts = await waiting_refund(engine, app)
        # An operator ends the person's sessions (the provider withdrew its access).
        assert await engine.adapters.sessions.end_principal(sam, by="operator:olga") == 1
        assert (await app.post(click(posted, ts, "approvals.approve", "U0SAM"))).status_code == 200
        (ephemeral,) = await app.slack.wait_for("chat.postEphemeral")
        assert "sign in to approvals on the web again" in ephemeral.body["text"]
        # Signed in again: its clicks decide again.
        await oidc_sign_in(app, "sam")
        assert (await app.post(click(posted, ts, "approvals.approve", "U0SAM"))).status_code == 200
        assert await status_of(engine, request_id) is RequestStatus.APPROVED
    assert (await audited(engine, request_id))[0] == (
        "slack.refused",
        "signed out",
        "slack:U0SAM",
    )


async def test_without_the_setting_the_claim_links_nothing(
    engine: Engine, settings: Settings, provider: RunningProvider
) -> None:
    async with served(engine, with_oidc(settings, provider, None)) as app:
        await oidc_sign_in(app, "sam")
        assert await app.desk.links.oidc_principal_of("U0SAM") is None
        _, request_id, posted, ts = await waiting_refund(engine, app)
        assert (await app.post(click(posted, ts, "approvals.approve", "U0SAM"))).status_code == 200
        await app.slack.wait_for("chat.postEphemeral")
        await asyncio.sleep(0.1)
    assert await status_of(engine, request_id) is RequestStatus.PENDING
    assert await audited(engine, request_id) == [("slack.refused", "not linked", "slack:U0SAM")]
