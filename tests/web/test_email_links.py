"""One-time e-mail links, end to end: the notifier mails each account that may decide a waiting
refund its own links (SMTP server on loopback, aiosmtpd), and the app, served over TCP, answers
them. Opening a link decides nothing; its button decides once, as that account, under the web's
rules; a reuse, an expired link, a disabled account and one that left the group decide nothing
and are audited."""

from __future__ import annotations

import asyncio
import json
import re
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from itsdangerous.encoding import base64_decode, base64_encode

from approvals.decision_kinds import DecisionKind
from approvals.model import RequestStatus
from tests.integration.governed_graphs import GRAPHS
from tests.integration.helpers import scalar, start_refund, verified
from tests.integration.receivers import MailRecorder, smtp_receiver
from web.channels.smtp import LinkDesk
from web.engine import Engine, open_engine
from web.notifier import Notifier
from web.serving import bind, serving, url_of
from web.settings import Settings

PASSWORD = "a-long-enough-password"
ADDRESSES = {
    "alice": "alice@example.com",
    "bob": "bob@example.com",
    "carol": "carol@example.com",
    "dave": "dave@example.com",
    "erin": "erin@example.com",
}


@dataclass
class Served:
    url: str
    mail: MailRecorder
    notifier: Notifier
    desk: LinkDesk

    def links_of(self, address: str) -> dict[str, str]:
        """The links the mail to ``address`` carries, by decision."""
        (sent,) = [m for m in self.mail.mail if m.recipients == [address]]
        text = sent.message.get_content()
        return {k.lower(): v for k, v in re.findall(r"(Approve|Reject): (\S+)", text)}


@asynccontextmanager
async def served(engine: Engine, settings: Settings, **more: Any) -> AsyncIterator[Served]:
    """The app on TCP, its notifier mailing the accounts' own addresses (with links)."""
    sock = bind("127.0.0.1", 0)
    url = url_of(sock)
    with smtp_receiver() as (mail, port):
        configured = settings.model_copy(
            update={
                "public_url": url,
                "notify_smtp_host": "127.0.0.1",
                "notify_smtp_port": port,
                "notify_smtp_from": "approvals@example.com",
                "notify_smtp_group_to": {"support": ["support-leads@example.com"]},
                "notify_smtp_accounts": ADDRESSES,
                **more,
            }
        )
        # The composition root's notifier for these settings (build_adapters gives it the
        # database, where the links check accounts and requests).
        async with open_engine(engine.adapters.url, configured) as built:
            notifier = built.notifier
            assert notifier.email_links is not None
        notifier = Notifier.from_settings(
            engine.notifications, configured, engine.run_events, db=engine.adapters.db
        )
        engine.adapters = replace(engine.adapters, notifier=notifier)
        assert notifier.email_links is not None
        try:
            async with serving(configured, sock, engine=engine):
                yield Served(url, mail, notifier, notifier.email_links)
        finally:
            sock.close()


async def accounts(engine: Engine) -> None:
    # alice starts the refunds (waiting_refund): she is in support, but never decides her own.
    await engine.accounts.add_user("alice", PASSWORD, ["support"])
    await engine.accounts.add_user("bob", PASSWORD, ["support"])
    await engine.accounts.add_user("carol", PASSWORD, ["support"])
    await engine.accounts.add_user("dave", PASSWORD, ["finance"])
    await engine.accounts.add_user("erin", PASSWORD, ["support"])


async def waiting_refund(engine: Engine, app: Served) -> str:
    """A refund waiting for support, announced (the mail is sent)."""
    request_id: str = (await start_refund(engine, principal="local:alice")).pending[0]
    assert await app.notifier.run_once() == 1
    return request_id


def with_account(token: str, account: str) -> str:
    """``token`` with another account's name in it, its signature kept."""
    payload, signature = token.rsplit(".", 1)
    # itsdangerous compresses a payload zlib makes shorter, and marks it with a leading dot.
    raw = base64_decode(payload.removeprefix("."))
    claim = json.loads(zlib.decompress(raw) if payload.startswith(".") else raw)
    altered = base64_encode(json.dumps({**claim, "a": account}, separators=(",", ":")))
    return f"{altered.decode()}.{signature}"


def form_token(page: str) -> str:
    match = re.search(r'name="form_token" value="([^"]+)"', page)
    assert match, page
    return match.group(1)


async def press(client: httpx.AsyncClient, link: str, page: str, **form: str) -> httpx.Response:
    """The page's button, as a browser posts it (from the app's origin)."""
    origin = str(client.base_url).rstrip("/")
    return await client.post(
        link, data={"form_token": form_token(page), **form}, headers={"origin": origin}
    )


async def status_of(engine: Engine, request_id: str) -> RequestStatus:
    request = await engine.requests.get(request_id)
    assert request is not None
    return request.status


async def audited(engine: Engine, request_id: str) -> list[tuple[str, str | None, str]]:
    rows = await scalar(
        engine,
        "SELECT coalesce(json_agg(json_build_array(kind, data->>'refused', principal)"
        " ORDER BY id), '[]') FROM audit_events"
        " WHERE request_id = %s AND kind LIKE 'email_link.%%'",
        request_id,
    )
    return [tuple(r) for r in rows]


async def test_each_account_that_may_decide_gets_its_own_links_and_no_one_else_does(
    engine: Engine, settings: Settings
) -> None:
    await accounts(engine)
    await engine.accounts.disable_user("erin")
    async with served(engine, settings) as app:
        request_id = await waiting_refund(engine, app)

    recipients = sorted(r for m in app.mail.mail for r in m.recipients)
    # alice started the run, dave is not in support, erin is disabled; the group's address
    # gets no links.
    assert recipients == ["bob@example.com", "carol@example.com", "support-leads@example.com"]
    (shared,) = [m for m in app.mail.mail if m.recipients == ["support-leads@example.com"]]
    assert "/email-links/" not in shared.message.get_content()
    bob, carol = app.links_of("bob@example.com"), app.links_of("carol@example.com")
    assert sorted(bob) == ["approve", "reject"]
    assert bob["approve"] != carol["approve"]
    claim = app.desk.links.read(bob["approve"].rsplit("/", 1)[1])
    assert claim is not None
    assert (claim.request_id, claim.account, claim.kind) == (
        request_id,
        "bob",
        DecisionKind.APPROVE,
    )
    request = await engine.requests.get(request_id)
    assert request is not None
    assert claim.expires <= request.expires_at.timestamp()


async def test_opening_a_link_decides_nothing_and_its_button_decides_once(
    engine: Engine, settings: Settings
) -> None:
    await accounts(engine)
    async with served(engine, settings) as app:
        request_id = await waiting_refund(engine, app)
        link = app.links_of("bob@example.com")["approve"]
        async with httpx.AsyncClient(base_url=app.url) as scanner:
            for _ in range(3):  # a mail scanner opening the link, again and again
                assert (await scanner.get(link)).status_code == 200
        assert await status_of(engine, request_id) is RequestStatus.PENDING

        async with httpx.AsyncClient(base_url=app.url) as browser:
            page = (await browser.get(link)).text
            assert "issue_refund" in page
            decided = await press(browser, link, page)
            assert decided.status_code == 200, decided.text
            assert "Approved" in decided.text
            assert await status_of(engine, request_id) is RequestStatus.APPROVED

            again = await press(browser, link, page)
            assert again.status_code == 409
            assert "already used" in again.text
            reopened = await browser.get(link)
            assert reopened.status_code == 409
            assert 'name="form_token"' not in reopened.text

    _, decision = await engine.requests.decision_of(request_id)
    assert decision is not None
    assert decision.principal == "local:bob"
    assert await audited(engine, request_id) == [
        ("email_link.used", None, "local:bob"),
        ("email_link.refused", "reused", "local:bob"),
    ]
    await verified(engine)


async def test_the_reject_link_records_the_reason_given_on_its_page(
    engine: Engine, settings: Settings
) -> None:
    await accounts(engine)
    async with served(engine, settings) as app:
        request_id = await waiting_refund(engine, app)
        link = app.links_of("carol@example.com")["reject"]
        async with httpx.AsyncClient(base_url=app.url) as browser:
            page = (await browser.get(link)).text
            assert 'name="reason"' in page
            decided = await press(browser, link, page, reason="the order was never paid")
            assert decided.status_code == 200, decided.text
    assert await status_of(engine, request_id) is RequestStatus.REJECTED
    _, decision = await engine.requests.decision_of(request_id)
    assert decision is not None
    assert (decision.principal, decision.reason) == ("local:carol", "the order was never paid")


async def test_an_expired_link_is_refused_and_audited(engine: Engine, settings: Settings) -> None:
    await accounts(engine)
    # Long enough for the page to be opened before the link expires on a loaded machine.
    async with served(engine, settings, email_link_seconds=3) as app:
        request_id = await waiting_refund(engine, app)
        link = app.links_of("bob@example.com")["approve"]
        async with httpx.AsyncClient(base_url=app.url) as browser:
            page = (await browser.get(link)).text
            await asyncio.sleep(3.2)
            refused = await press(browser, link, page)
            assert refused.status_code == 410
            assert (await browser.get(link)).status_code == 410
    assert await status_of(engine, request_id) is RequestStatus.PENDING
    assert await audited(engine, request_id) == [("email_link.refused", "expired", "local:bob")]


@pytest.mark.parametrize("change", ["disabled", "left the group"])
async def test_a_link_of_an_account_disabled_or_gone_from_the_group_since_does_nothing(
    engine: Engine, settings: Settings, change: str
) -> None:
    await accounts(engine)
    async with served(engine, settings) as app:
        request_id = await waiting_refund(engine, app)
        link = app.links_of("carol@example.com")["approve"]
        async with httpx.AsyncClient(base_url=app.url) as browser:
            page = (await browser.get(link)).text
            if change == "disabled":
                await engine.accounts.disable_user("carol")
            else:
                await engine.accounts.set_groups("carol", ["finance"])
            refused = await press(browser, link, page)
            assert refused.status_code == 403
            assert (await browser.get(link)).status_code == 403
    assert await status_of(engine, request_id) is RequestStatus.PENDING
    why = "account disabled" if change == "disabled" else "not allowed"
    assert await audited(engine, request_id) == [("email_link.refused", why, "local:carol")]


async def test_a_link_made_for_another_account_or_altered_does_nothing(
    engine: Engine, settings: Settings
) -> None:
    await accounts(engine)
    async with served(engine, settings) as app:
        request_id = await waiting_refund(engine, app)
        request = await engine.requests.get(request_id)
        assert request is not None
        # Signed by the app for dave, who is not in support: it shows nothing to decide.
        token = app.desk.links.token(request_id, "dave", DecisionKind.APPROVE, request.expires_at)
        bob = app.links_of("bob@example.com")["approve"]
        async with httpx.AsyncClient(base_url=app.url) as browser:
            dave = await browser.get(app.desk.links.url(token))
            assert dave.status_code == 403
            assert 'name="form_token"' not in dave.text
            # Another account's name in bob's link: the signature no longer matches.
            altered = app.desk.links.url(with_account(bob.rsplit("/", 1)[1], "dave"))
            assert (await browser.get(altered)).status_code == 404
            page = (await browser.get(bob)).text
            forged = await press(browser, bob[:-3] + "abc", page)
            assert forged.status_code == 404
    assert await status_of(engine, request_id) is RequestStatus.PENDING


async def test_a_post_that_did_not_come_from_the_links_page_decides_nothing(
    engine: Engine, settings: Settings
) -> None:
    await accounts(engine)
    async with served(engine, settings) as app:
        request_id = await waiting_refund(engine, app)
        link = app.links_of("bob@example.com")["approve"]
        async with httpx.AsyncClient(base_url=app.url) as browser:
            page = (await browser.get(link)).text
            token = form_token(page)
            no_form = await browser.post(link, headers={"origin": app.url})
            assert no_form.status_code == 403
            other_site = await browser.post(
                link, data={"form_token": token}, headers={"origin": "https://evil.example"}
            )
            assert other_site.status_code == 403
        async with httpx.AsyncClient(base_url=app.url) as stranger:  # without the page's cookie
            no_cookie = await stranger.post(
                link, data={"form_token": token}, headers={"origin": app.url}
            )
            assert no_cookie.status_code == 403
    assert await status_of(engine, request_id) is RequestStatus.PENDING
    assert await audited(engine, request_id) == []


async def test_the_confirmation_page_has_no_script_and_nothing_that_submits_by_itself(
    engine: Engine, settings: Settings
) -> None:
    await accounts(engine)
    async with served(engine, settings) as app:
        await waiting_refund(engine, app)
        link = app.links_of("bob@example.com")["approve"]
        async with httpx.AsyncClient(base_url=app.url) as browser:
            answer = await browser.get(link)
    page = answer.text.lower()
    assert "<script" not in page
    assert "javascript:" not in page
    assert 'http-equiv="refresh"' not in page
    assert not re.search(r"\son[a-z]+\s*=", page), "an inline event handler"
    assert "autofocus" not in page
    assert page.count("<form") == 1
    assert 'method="post"' in page
    # The app's Content-Security-Policy would stop an injected inline script in any case.
    assert "script-src 'self'" in answer.headers["content-security-policy"]


@pytest.fixture
async def governed(database_url: str, settings: Settings, tmp_path: Path) -> AsyncIterator[Engine]:
    """An engine with the test graphs, among them ``quorum`` (two support approvals)."""
    configured = settings.model_copy(update={"graphs": GRAPHS})
    async with open_engine(database_url, configured) as engine:
        yield engine


async def test_a_link_approval_is_one_vote_of_a_quorum_and_counts_once(
    governed: Engine, settings: Settings
) -> None:
    engine = governed
    await accounts(engine)
    async with served(engine, settings) as app:
        out = await engine.runner.start(
            "quorum", {"message": "refund 1001"}, principal="local:shop"
        )
        request_id = out.pending[0]
        assert await app.notifier.run_once() == 1
        bob, carol = app.links_of("bob@example.com"), app.links_of("carol@example.com")
        async with httpx.AsyncClient(base_url=app.url) as browser:
            page = (await browser.get(bob["approve"])).text
            voted = await press(browser, bob["approve"], page)
            assert voted.status_code == 200, voted.text
            assert "1 of the 2" in voted.text
            assert await status_of(engine, request_id) is RequestStatus.PENDING
            again = await press(browser, bob["approve"], page)
            assert again.status_code == 409
            # bob's other link is spent with the first: one person, one decision.
            assert (await browser.get(bob["reject"])).status_code == 409
        async with httpx.AsyncClient(base_url=app.url) as browser:
            page = (await browser.get(carol["approve"])).text
            assert (await press(browser, carol["approve"], page)).status_code == 200
    assert await status_of(engine, request_id) is RequestStatus.APPROVED
    assert await engine.requests.votes(request_id) == ["local:bob", "local:carol"]
    assert await audited(engine, request_id) == [
        ("email_link.used", None, "local:bob"),
        ("email_link.refused", "reused", "local:bob"),
        ("email_link.used", None, "local:carol"),
    ]
