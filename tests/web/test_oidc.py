"""OpenID Connect sign-in over real HTTP: a real provider (oidc-provider-mock) and a small app
mounting ``OidcLogin``'s router, both under servers on loopback ports; the browser is an
``httpx.Client`` that follows each redirect by hand so every hop can be checked."""

from __future__ import annotations

import base64
import hashlib
import html
import socket
import threading
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from approvals.principals import Principal
from tests.waiting import eventually_sync
from tests.web.oidc_provider import RunningProvider, run_oidc_provider
from web.faces.pages.oidc import FLOW_COOKIE, OidcLogin, groups_of

USERS = {
    "alice": {
        "preferred_username": "alice.a",
        "email": "alice@example.test",
        "groups": ["approvers", "finance"],
    }
}


@dataclass
class SignInApp:
    url: str
    #: Mounted under ``/down``: an OidcLogin whose issuer is a closed port.
    down_prefix: str = "/down"


def _free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def _closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with closing(_free_socket()) as sock:
        return int(sock.getsockname()[1])


async def _on_login(request: Request, principal: Principal) -> Response:
    return JSONResponse(
        {"id": principal.id, "name": principal.name, "groups": sorted(principal.groups)}
    )


async def _on_error(request: Request, message: str, status: int) -> Response:
    return HTMLResponse(f"<h1>Sign-in failed</h1><p>{html.escape(message)}</p>", status_code=status)


def _oidc_login(issuer: str, redirect_uri: str) -> OidcLogin:
    return OidcLogin(
        issuer=issuer,
        client_id="approvals-test",
        client_secret="test-client-secret",
        redirect_uri=redirect_uri,
        on_login=_on_login,
        on_error=_on_error,
        http_timeout=2.0,
    )


@contextmanager
def _serve_app(issuer: str) -> Iterator[SignInApp]:
    """The sign-in app under uvicorn on 127.0.0.1, in a thread, until the block ends."""
    # The redirect URI names the port, so the socket is bound before the app is built.
    sock = _free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = FastAPI()
    app.include_router(_oidc_login(issuer, f"{url}/auth/oidc/callback").router())
    down = _oidc_login(f"http://127.0.0.1:{_closed_port()}", f"{url}/down/auth/oidc/callback")
    app.include_router(down.router(), prefix="/down")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    eventually_sync(lambda: server.started or not thread.is_alive(), what="the sign-in app")
    if not server.started:
        raise RuntimeError("the sign-in app did not start")
    try:
        yield SignInApp(url=url)
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()


@pytest.fixture(scope="session")
def provider() -> Iterator[RunningProvider]:
    with run_oidc_provider(USERS) as running:
        yield running


@pytest.fixture(scope="session")
def sign_in_app(provider: RunningProvider) -> Iterator[SignInApp]:
    with _serve_app(provider.issuer) as app:
        yield app


@pytest.fixture
def browser() -> Iterator[httpx.Client]:
    """A fresh cookie jar per test; redirects are followed by hand."""
    with httpx.Client(follow_redirects=False, timeout=5) as client:
        yield client


def _start(browser: httpx.Client, app_url: str) -> str:
    """Open the app's OIDC login; return the provider authorization URL it redirects to."""
    login = browser.get(f"{app_url}/login/oidc")
    assert login.status_code == 302, login.text
    return login.headers["location"]


def _consent(browser: httpx.Client, authorize_url: str, form: dict[str, str]) -> str:
    """Answer the provider's authorization form; return the callback URL it redirects to."""
    page = browser.get(authorize_url)
    assert page.status_code == 200, page.text
    answer = browser.post(authorize_url, data=form)
    assert answer.status_code == 302, answer.text
    return answer.headers["location"]


def _sign_in(browser: httpx.Client, app_url: str, sub: str) -> httpx.Response:
    callback = _consent(browser, _start(browser, app_url), {"sub": sub})
    return browser.get(callback)


def _with_query(url: str, **changes: str | None) -> str:
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    for key, value in changes.items():
        if value is None:
            query.pop(key, None)
        else:
            query[key] = value
    return urlunsplit(parts._replace(query=urlencode(query)))


def test_sign_in_yields_the_issuer_subject_principal_with_its_groups(
    provider: RunningProvider, sign_in_app: SignInApp, browser: httpx.Client
) -> None:
    done = _sign_in(browser, sign_in_app.url, "alice")

    assert done.status_code == 200, done.text
    assert done.json() == {
        "id": f"oidc:{provider.issuer}#alice",
        "name": "alice.a",
        "groups": ["approvers", "finance"],
    }
    # The flow cookie is spent: deleted by the callback's response.
    assert FLOW_COOKIE not in browser.cookies


def test_the_authorization_request_uses_pkce_s256_and_the_token_request_proves_it(
    provider: RunningProvider, sign_in_app: SignInApp, browser: httpx.Client
) -> None:
    authorize_url = _start(browser, sign_in_app.url)
    request = {k: v[0] for k, v in parse_qs(urlsplit(authorize_url).query).items()}
    assert authorize_url.startswith(f"{provider.issuer}/oauth2/authorize?")
    assert request["code_challenge_method"] == "S256"
    assert request["response_type"] == "code"
    assert request["redirect_uri"] == f"{sign_in_app.url}/auth/oidc/callback"
    assert request["state"]
    assert request["nonce"]
    assert "openid" in request["scope"].split()

    callback = _consent(browser, authorize_url, {"sub": "alice"})
    code = parse_qs(urlsplit(callback).query)["code"][0]
    assert browser.get(callback).status_code == 200

    (exchange,) = [form for form in provider.token_requests() if form.get("code") == code]
    digest = hashlib.sha256(exchange["code_verifier"].encode()).digest()
    assert base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == request["code_challenge"]
    assert "client_secret" not in exchange  # sent as HTTP Basic, not in the form


@pytest.mark.parametrize(
    ("sub", "claims"),
    [
        # Issued to another client, with our client id as authorized party: authlib passed it.
        ("aud-other", {"aud": "some-other-client", "azp": "approvals-test"}),
        ("aud-empty", {"aud": []}),
        ("aud-none-of-ours", {"aud": "some-other-client"}),
    ],
)
def test_an_id_token_whose_audience_is_not_this_app_signs_nobody_in(
    provider: RunningProvider,
    sign_in_app: SignInApp,
    browser: httpx.Client,
    sub: str,
    claims: dict[str, Any],
) -> None:
    # The provider stub copies a user's claims over the ID token's own.
    provider.set_user(sub, {"preferred_username": sub, "groups": ["approvers"], **claims})
    refused = _sign_in(browser, sign_in_app.url, sub)
    assert refused.status_code == 502, refused.text


@pytest.mark.parametrize(
    ("claims", "name", "groups"),
    [
        ({"name": "Bob B", "groups": "operators"}, "Bob B", ["operators"]),
        ({"email": "carol@example.test", "groups": 42}, "carol@example.test", []),
        ({"groups": ["approvers", 7]}, "{sub}", []),
        ({}, "{sub}", []),
    ],
    ids=["single-string", "not-a-list", "list-with-a-non-string", "no-claim"],
)
def test_a_groups_claim_that_is_not_a_list_of_strings_gives_at_most_one_group(
    provider: RunningProvider,
    sign_in_app: SignInApp,
    browser: httpx.Client,
    request: pytest.FixtureRequest,
    claims: dict[str, object],
    name: str,
    groups: list[str],
) -> None:
    sub = f"user-{request.node.callspec.id}"
    provider.set_user(sub, claims)

    done = _sign_in(browser, sign_in_app.url, sub)

    assert done.status_code == 200, done.text
    assert done.json() == {
        "id": f"oidc:{provider.issuer}#{sub}",
        "name": name.format(sub=sub),
        "groups": groups,
    }


def test_groups_of_accepts_a_list_of_strings_or_one_string_only() -> None:
    assert groups_of(["a", "b", ""]) == {"a", "b"}
    assert groups_of("a") == {"a"}
    assert groups_of("") == frozenset()
    assert groups_of({"a": 1}) == frozenset()
    assert groups_of(None) == frozenset()


def test_denied_consent_shows_the_error_page_not_a_server_error(
    sign_in_app: SignInApp, browser: httpx.Client
) -> None:
    callback = _consent(browser, _start(browser, sign_in_app.url), {"action": "deny"})
    assert parse_qs(urlsplit(callback).query)["error"] == ["access_denied"]

    page = browser.get(callback)

    assert page.status_code == 403
    assert "consent was not given" in page.text
    assert FLOW_COOKIE not in browser.cookies


@pytest.mark.parametrize("state", ["tampered", None], ids=["tampered-state", "missing-state"])
def test_a_callback_whose_state_is_not_this_browsers_is_refused(
    sign_in_app: SignInApp, browser: httpx.Client, state: str | None
) -> None:
    callback = _consent(browser, _start(browser, sign_in_app.url), {"sub": "alice"})

    page = browser.get(_with_query(callback, state=state))

    assert page.status_code == 400
    assert "state mismatch" in page.text


def test_a_callback_in_a_browser_that_started_no_sign_in_is_refused(
    sign_in_app: SignInApp, browser: httpx.Client
) -> None:
    # Login CSRF: an attacker's own valid callback URL, opened in the victim's browser.
    callback = _consent(browser, _start(browser, sign_in_app.url), {"sub": "alice"})

    with httpx.Client(follow_redirects=False, timeout=5) as victim:
        page = victim.get(callback)

    assert page.status_code == 400
    assert "No sign-in was started in this browser" in page.text


def test_a_forged_flow_cookie_is_refused(sign_in_app: SignInApp, browser: httpx.Client) -> None:
    callback = _consent(browser, _start(browser, sign_in_app.url), {"sub": "alice"})
    (flow,) = [cookie for cookie in browser.cookies.jar if cookie.name == FLOW_COOKIE]
    flow.value = "eyJzdGF0ZSI6Ingi.forged.signature"

    page = browser.get(callback)

    assert page.status_code == 400
    assert "could not be verified" in page.text


def test_an_invalid_code_is_refused(sign_in_app: SignInApp, browser: httpx.Client) -> None:
    callback = _consent(browser, _start(browser, sign_in_app.url), {"sub": "alice"})

    page = browser.get(_with_query(callback, code="not-a-code-the-provider-issued"))

    assert page.status_code == 400
    assert "invalid, expired or already used" in page.text


def test_a_replayed_code_is_refused_even_with_its_flow_cookie(
    sign_in_app: SignInApp, browser: httpx.Client
) -> None:
    callback = _consent(browser, _start(browser, sign_in_app.url), {"sub": "alice"})
    flow = browser.cookies[FLOW_COOKIE]
    assert browser.get(callback).status_code == 200

    browser.cookies.set(FLOW_COOKIE, flow, domain="127.0.0.1", path="/auth/oidc/callback")
    page = browser.get(callback)

    assert page.status_code == 400
    assert "invalid, expired or already used" in page.text


def test_an_unreachable_provider_shows_a_502_page(
    sign_in_app: SignInApp, browser: httpx.Client
) -> None:
    page = browser.get(f"{sign_in_app.url}{sign_in_app.down_prefix}/login/oidc")

    assert page.status_code == 502
    assert "could not be reached" in page.text
    assert FLOW_COOKIE not in page.headers.get("set-cookie", "")


def test_a_provider_gone_before_the_token_exchange_shows_a_502_page(
    browser: httpx.Client,
) -> None:
    with ExitStack() as app_running:
        with run_oidc_provider(USERS) as short_lived:
            app = app_running.enter_context(_serve_app(short_lived.issuer))
            callback = _consent(browser, _start(browser, app.url), {"sub": "alice"})
        # The provider has stopped; the app, which discovered it already, still runs.

        page = browser.get(callback)

    assert page.status_code == 502
    assert "could not be reached" in page.text
