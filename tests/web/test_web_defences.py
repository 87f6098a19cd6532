"""The web app's defences against a hostile site, client or co-worker, over real HTTP: login
CSRF, a spoofed Host, spoofed X-Forwarded-For, what /events tells whom, and caching."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import pytest

from tests.integration.helpers import scalar
from tests.web.conftest import PASSWORD, Server, SignIn, add_user, csrf_of, login_csrf_of
from tests.web.test_pages import refund_request
from web.engine import Engine
from web.security import LOGIN_COOKIE, SESSION_COOKIE, LoginThrottle
from web.serving import server_config
from web.settings import Settings


async def test_a_sign_in_posted_from_another_site_is_refused(
    server: Server, engine: Engine
) -> None:
    await add_user(engine, "mallory", "support")
    form = {"username": "mallory", "password": PASSWORD, "next": "/"}
    # A cross-site form: the attacker's page cannot read our token or set our cookie.
    with httpx.Client(base_url=server.url, headers={"origin": "https://evil.example"}) as victim:
        no_token = victim.post("/login", data=form)
        # Even with a token and cookie the attacker fetched for itself, the origin is foreign.
        token = login_csrf_of(victim.get("/login").text)
        foreign = victim.post("/login", data={**form, "csrf": token})
    # Our own origin, but a token minted for another browser (its cookie is not ours).
    with httpx.Client(base_url=server.url, headers={"origin": server.url}) as attacker:
        stolen = login_csrf_of(attacker.get("/login").text)
    with httpx.Client(base_url=server.url, headers={"origin": server.url}) as victim:
        victim.get("/login")
        other_browser = victim.post("/login", data={**form, "csrf": stolen})
        assert SESSION_COOKIE not in victim.cookies
    for response in (no_token, foreign, other_browser):
        assert response.status_code == 403, response.text
        assert "did not come from this site" in response.text
        assert not any(SESSION_COOKIE in v for v in response.headers.get_list("set-cookie"))
    assert await scalar(engine, "select count(*) from web_sessions") == 0


async def test_the_sign_in_cookie_is_scoped_and_the_form_works_in_two_tabs(
    server: Server, engine: Engine
) -> None:
    await add_user(engine, "ann", "support")
    with httpx.Client(base_url=server.url, headers={"origin": server.url}) as c:
        first = c.get("/login")
        cookie = next(v for v in first.headers.get_list("set-cookie") if LOGIN_COOKIE in v)
        second_tab = c.get("/login")  # the same nonce: the first tab's form still works
        assert login_csrf_of(second_tab.text)
        signed = c.post(
            "/login",
            data={"username": "ann", "password": PASSWORD, "csrf": login_csrf_of(first.text)},
        )
    assert "HttpOnly" in cookie
    assert "Path=/login" in cookie
    assert signed.status_code == 303, signed.text


async def test_a_spoofed_host_header_does_not_make_a_foreign_origin_ours(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "ann", "support")
    _, request_id = await refund_request(engine)
    c = sign_in("ann")
    csrf = csrf_of(c.get(f"/requests/{request_id}").text)
    spoofed = c.post(
        f"/requests/{request_id}/approve",
        data={"csrf": csrf},
        headers={"host": "evil.example", "origin": "http://evil.example"},
    )
    assert spoofed.status_code == 403
    assert server.url in spoofed.text  # the message names the address to use instead
    assert await scalar(engine, "select count(*) from decisions") == 0
    with httpx.Client(base_url=server.url, headers={"host": "evil.example"}) as other:
        page = other.get("/login")
        token = login_csrf_of(page.text)
        refused = other.post(
            "/login",
            data={"username": "ann", "password": PASSWORD, "csrf": token},
            headers={"origin": "http://evil.example"},
        )
    assert refused.status_code == 403


async def test_rotating_x_forwarded_for_does_not_escape_the_sign_in_throttle(
    server: Server, engine: Engine
) -> None:
    await add_user(engine, "ann", "support")
    attempts = server.settings.login_attempts
    with httpx.Client(base_url=server.url, headers={"origin": server.url}) as c:
        codes = []
        for i in range(attempts + 1):
            # Each attempt claims another client address: believed, each would be a first try.
            token = login_csrf_of(c.get("/login").text)
            codes.append(
                c.post(
                    "/login",
                    data={"username": "ann", "password": "wrong", "csrf": token},
                    headers={"x-forwarded-for": f"203.0.113.{i}"},
                ).status_code
            )
    assert codes == [401] * attempts + [429]


def test_forwarded_headers_are_believed_only_from_configured_proxies(
    web_settings: Settings,
) -> None:
    default = server_config(object(), web_settings)  # type: ignore[arg-type]
    assert default.proxy_headers is False
    behind = web_settings.model_copy(update={"trusted_proxies": ["10.0.0.0/8"]})
    config = server_config(object(), behind)  # type: ignore[arg-type]
    assert config.proxy_headers is True
    assert config.forwarded_allow_ips == ["10.0.0.0/8"]


def test_the_throttle_counts_per_account_across_addresses_without_locking_out_an_address() -> None:
    throttle = LoginThrottle(attempts=3, window=300, account_attempts=6)
    # One person mistyping on a shared address: paused there, for that account only.
    for _ in range(3):
        assert throttle.attempt("ann", "198.51.100.7")[0] == 0  # each let through, counted
    assert throttle.blocked("ann", "198.51.100.7") > 0
    assert throttle.blocked("bob", "198.51.100.7") == 0  # her colleagues behind the same NAT
    assert throttle.blocked("ann", "192.0.2.1") == 0  # and ann herself, elsewhere
    # Guessing from many addresses: the account-wide limit stops it.
    for i in range(3):
        throttle.attempt("ann", f"203.0.113.{i}")
    assert throttle.blocked("ann", "203.0.113.200") > 0
    assert throttle.blocked("bob", "203.0.113.200") == 0


async def test_guesses_sent_at_once_are_throttled_as_if_sent_one_by_one(
    server: Server, engine: Engine
) -> None:
    # Checked before and counted after the password check (scrypt, on a thread), 40 guesses
    # sent together were all checked, the right one among them signing in.
    await add_user(engine, "ann", "support")
    async with httpx.AsyncClient(
        base_url=server.url, headers={"origin": server.url}, timeout=120
    ) as c:
        token = login_csrf_of((await c.get("/login")).text)

        async def guess(password: str) -> int:
            form = {"username": "ann", "password": password, "csrf": token}
            return (await c.post("/login", data=form)).status_code

        passwords = [f"wrong-{i}" for i in range(40)]
        passwords[20] = PASSWORD
        codes = await asyncio.gather(*(guess(p) for p in passwords))
    checked = [code for code in codes if code in (401, 303)]
    assert len(checked) <= server.settings.login_attempts, codes
    assert codes.count(429) >= len(codes) - server.settings.login_attempts


def test_a_success_takes_back_only_its_own_attempt() -> None:
    throttle = LoginThrottle(attempts=3, window=300, account_attempts=4)
    for i in range(3):
        throttle.attempt("ann", f"203.0.113.{i}")  # someone else's guesses
    wait, counted_at = throttle.attempt("ann", "198.51.100.7")
    assert wait == 0
    throttle.succeeded("ann", "198.51.100.7", counted_at)
    # Her sign-in is not a guess against her account; the three guesses still count.
    assert throttle.blocked("ann", "192.0.2.1") == 0
    throttle.attempt("ann", "192.0.2.1")
    assert throttle.blocked("ann", "192.0.2.2") > 0


class Clock:
    """``time.monotonic`` for the throttle, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr("web.security.time.monotonic", clock)
    return clock


def small_throttle(capacity: int = 200) -> LoginThrottle:
    throttle = LoginThrottle(attempts=5, window=300, account_attempts=20)
    throttle.CAPACITY = capacity
    return throttle


def test_a_spray_of_made_up_names_never_forgets_a_count_at_its_limit(clock: Clock) -> None:
    # Forgetting the oldest counts first, about 5,000 failures of made-up names wiped the
    # account-wide count of a name guessed to its limit from many addresses.
    throttle = small_throttle()
    for i in range(20):
        throttle.attempt("alice", f"203.0.113.{i}")
    assert throttle.blocked("alice", "192.0.2.1") > 0
    for i in range(3 * throttle.CAPACITY):
        throttle.attempt(f"junk-{i}", "198.51.100.7")
        clock.now += 0.01
    assert throttle.blocked("alice", "192.0.2.1") > 0
    assert len(throttle._failures) <= throttle.CAPACITY


def test_a_spray_never_buys_a_name_guessed_under_its_limits_more_guesses(clock: Clock) -> None:
    # Kept under its limits (4 of 5 from an address, 19 of 20 in all), a name's counts were
    # the ones a spray of made-up names made the throttle forget: guess, spray, guess again,
    # and 48 guesses got through from one address in 30 s where 5 may.
    throttle = small_throttle()
    let_through = 0
    for _ in range(30):
        for _ in range(4):
            wait, _ = throttle.attempt("alice", "198.51.100.7")
            let_through += wait == 0
        for i in range(2 * throttle.CAPACITY):
            throttle.attempt(f"junk-{clock.now}-{i}", "198.51.100.7")
        clock.now += 1
    assert let_through == 5
    assert len(throttle._recent(("alice", None))) == 5  # the account-wide count, kept too
    assert len(throttle._failures) <= throttle.CAPACITY


def test_a_full_throttle_makes_new_names_wait_for_the_oldest_count_to_end(clock: Clock) -> None:
    throttle = small_throttle(capacity=100)
    for i in range(50):
        assert throttle.attempt(f"name-{i}", "198.51.100.7")[0] == 0
        clock.now += 1
    assert len(throttle._failures) == 100
    # Full: a name and address not counted yet waits until the oldest count ends (it failed
    # 50 s ago, in a 300 s window); a name already counted goes on within its limits.
    wait, counted_at = throttle.attempt("newcomer", "192.0.2.1")
    assert (wait, counted_at) == (250.0, 0.0)
    assert throttle.attempt("name-49", "198.51.100.7")[0] == 0
    assert len(throttle._failures) == 100
    clock.now += 250
    assert throttle.attempt("newcomer", "192.0.2.1")[0] == 0
    assert ("name-0", None) not in throttle._failures  # ended, and forgotten


def test_a_success_that_empties_a_count_gives_its_place_back(clock: Clock) -> None:
    # An account-wide count emptied by a success kept its place: with room for one, a
    # newcomer was told to wait a whole window.
    throttle = small_throttle(capacity=4)
    _, counted_at = throttle.attempt("mallory", "10.0.0.2")
    throttle.succeeded("mallory", "10.0.0.2", counted_at)
    throttle.attempt("xavier", "10.0.0.1")
    assert throttle.attempt("newcomer", "192.0.2.1") == (0.0, clock.now)
    # Smaller than one attempt's two counts: every new name waits a window, nothing raises.
    assert small_throttle(capacity=1).attempt("anyone", "192.0.2.1") == (300.0, 0.0)


def test_counts_end_with_their_window_and_expired_ones_are_forgotten(clock: Clock) -> None:
    throttle = small_throttle()
    for _ in range(5):
        throttle.attempt("carol", "192.0.2.1")
    assert throttle.blocked("carol", "192.0.2.1") == 300.0
    clock.now += 299.5
    assert throttle.blocked("carol", "192.0.2.1") == pytest.approx(0.5)
    # At the window's end the failures have left it: the wait is over, and nothing of them
    # counts any more (a failure exactly a window old counted while the wait said go).
    clock.now += 0.5
    assert throttle.blocked("carol", "192.0.2.1") == 0
    throttle.attempt("dave", "192.0.2.2")
    assert set(throttle._failures) == {("dave", "192.0.2.2"), ("dave", None)}


def sse_events(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
    """(event, data) pairs of a server-sent event stream's lines, as they arrive."""
    event, data = "message", ""
    for line in lines:
        if line.startswith("event:"):
            event = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data = line.removeprefix("data:").strip()
        elif line == "" and data:
            yield event, data
            event, data = "message", ""


async def test_events_tell_a_principal_only_of_requests_it_may_see(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "fin", "finance")
    fin = sign_in("fin")
    timeout = httpx.Timeout(30, read=60)
    with fin.stream("GET", "/events", timeout=timeout) as stream:
        assert stream.status_code == 200
        lines = stream.iter_lines()
        assert next(lines).startswith("retry:")  # the stream has taken its starting point
        _, support_only = await refund_request(engine)  # 25.00: support's, not finance's
        big = await engine.runner.start("refund", {"message": "refund 1002"}, principal="local:x")
        event, data = next(sse_events(lines))
    assert event == "request"
    told = json.loads(data)
    # The first news fin gets is of its own group's request only: support's was not told.
    assert told["id"] != support_only
    assert told == {
        "id": big.pending[0],
        "run_id": big.run_id,
        "tool": "issue_refund",
        "kind": "opened",
        "status": "pending",
    }


async def test_pages_and_api_answers_are_not_cached_but_assets_may_be(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "ann", "support")
    _, request_id = await refund_request(engine)
    c = sign_in("ann")
    for path in (f"/requests/{request_id}", "/", "/history", "/login", "/no-such-page"):
        assert c.get(path).headers.get("cache-control") == "no-store", path
    api = httpx.get(f"{server.url}/api/v1/pending")
    assert api.headers.get("cache-control") == "no-store"
    assert "no-store" not in httpx.get(f"{server.url}/static/app.css").headers.get(
        "cache-control", ""
    )
