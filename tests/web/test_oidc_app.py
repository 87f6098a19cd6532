"""The whole app signed into through a real OpenID provider: the session that results carries
the provider's groups, which decide what the approver sees."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.integration.helpers import scalar
from tests.integration.inprocess import invoke
from tests.web.conftest import Server, csrf_of
from tests.web.oidc_provider import RunningProvider, run_oidc_provider
from web.engine import Engine
from web.security import SESSION_COOKIE
from web.settings import Settings


@pytest.fixture(scope="module")
def provider() -> Iterator[RunningProvider]:
    users = {
        "sam": {"preferred_username": "sam", "groups": ["support"]},
        "fin": {"preferred_username": "fin", "groups": ["finance"]},
    }
    with run_oidc_provider(users) as running:
        yield running


@pytest.fixture
def web_settings(web_settings: Settings, provider: RunningProvider) -> Settings:
    return web_settings.model_copy(
        update={
            "oidc_issuer": provider.issuer,
            "oidc_client_id": "approvals",
            "oidc_client_secret": "approvals-client-secret",
        }
    )


def oidc_sign_in(server: Server, sub: str) -> httpx.Client:
    browser = httpx.Client(follow_redirects=False, timeout=10, headers={"origin": server.url})
    login_page = browser.get(f"{server.url}/login")
    assert "/login/oidc" in login_page.text
    authorize = browser.get(f"{server.url}/login/oidc").headers["location"]
    assert browser.get(authorize).status_code == 200
    callback = browser.post(authorize, data={"sub": sub}).headers["location"]
    done = browser.get(callback)
    assert done.status_code == 303, done.text
    return browser


async def test_an_oidc_approver_sees_what_its_groups_allow(
    server: Server, engine: Engine, provider: RunningProvider
) -> None:
    out = await engine.runner.start("refund", {"message": "refund 1001"}, principal="local:x")
    request_id = out.pending[0]
    sam = oidc_sign_in(server, "sam")
    fin = oidc_sign_in(server, "fin")
    try:
        inbox = sam.get(f"{server.url}/")
        assert inbox.status_code == 200
        assert f"/requests/{request_id}" in inbox.text
        assert f"oidc:{provider.issuer}#sam" in inbox.text  # the principal, shown on hover
        assert sam.get(f"{server.url}/requests/{request_id}").status_code == 200
        assert fin.get(f"{server.url}/requests/{request_id}").status_code == 404
    finally:
        sam.close()
        fin.close()


def test_denied_consent_shows_a_clear_page(server: Server) -> None:
    with httpx.Client(follow_redirects=False, timeout=10) as browser:
        authorize = browser.get(f"{server.url}/login/oidc").headers["location"]
        callback = browser.post(authorize, data={"action": "deny"}).headers["location"]
        page = browser.get(callback)
    assert page.status_code == 403
    assert "<html" in page.text
    assert "Not allowed" in page.text


async def test_an_oidc_session_ends_on_sign_out_and_by_an_operator(
    server: Server, engine: Engine, provider: RunningProvider, cli_env: dict[str, str]
) -> None:
    out = await engine.runner.start("refund", {"message": "refund 1001"}, principal="local:x")
    request_id = out.pending[0]
    sam = oidc_sign_in(server, "sam")
    other_sam = oidc_sign_in(server, "sam")  # a second browser of the same person
    try:
        page = sam.get(f"{server.url}/requests/{request_id}")
        assert page.status_code == 200
        csrf = csrf_of(page.text)
        cookie = sam.cookies[SESSION_COOKIE]
        assert sam.post(f"{server.url}/logout", data={"csrf": csrf}).status_code == 303
        with httpx.Client(cookies={SESSION_COOKIE: cookie}, headers={"origin": server.url}) as c:
            assert c.get(f"{server.url}/").status_code == 303
            refused = c.post(f"{server.url}/requests/{request_id}/approve", data={"csrf": csrf})
        assert refused.headers["location"].startswith("/login")
        # The provider cannot tell us when it withdraws access: an operator ends the sessions.
        other_csrf = csrf_of(other_sam.get(f"{server.url}/requests/{request_id}").text)
        ended = await invoke(cli_env, "sessions", "end", f"oidc:{provider.issuer}#sam")
        assert ended.code == 0, ended.stderr
        approve = other_sam.post(
            f"{server.url}/requests/{request_id}/approve", data={"csrf": other_csrf}
        )
        assert approve.headers["location"].startswith("/login")
        assert await scalar(engine, "select count(*) from decisions") == 0
    finally:
        sam.close()
        other_sam.close()
