"""Sessions are rows in the database, over real HTTP: a cookie saved before sign-out, before
``approvals users disable`` or before a change of groups decides nothing afterwards, and the
table never holds a usable session id."""

from __future__ import annotations

import hashlib

import httpx
from itsdangerous import URLSafeTimedSerializer

from tests.integration.helpers import scalar
from tests.integration.inprocess import invoke
from tests.web.conftest import PASSWORD, Server, SignIn, add_user, csrf_of, login
from tests.web.test_pages import refund_request
from web.engine import Engine
from web.security import SESSION_COOKIE
from web.settings import revealed


def saved(server: Server, client: httpx.Client) -> httpx.Client:
    """Another client holding a copy of ``client``'s session cookie, as a thief would."""
    return httpx.Client(
        base_url=server.url,
        cookies={SESSION_COOKIE: client.cookies[SESSION_COOKIE]},
        headers={"origin": server.url},
        timeout=30,
    )


async def test_a_cookie_saved_before_sign_out_no_longer_works(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "ann", "support")
    _, request_id = await refund_request(engine)
    ann = sign_in("ann")
    csrf = csrf_of(ann.get(f"/requests/{request_id}").text)
    with saved(server, ann) as copy:
        assert copy.get("/").status_code == 200
        assert ann.post("/logout", data={"csrf": csrf}).status_code == 303
        # At once, although this process looked at the session a moment ago (its cache).
        page = copy.get(f"/requests/{request_id}")
        approve = copy.post(f"/requests/{request_id}/approve", data={"csrf": csrf})
    assert page.status_code == 303
    assert page.headers["location"].startswith("/login")
    assert approve.status_code == 303
    assert approve.headers["location"].startswith("/login")
    assert await scalar(engine, "select count(*) from decisions") == 0
    assert await scalar(engine, "select count(*) from web_sessions") == 0


async def test_a_disabled_accounts_saved_cookie_cannot_approve(
    server: Server, engine: Engine, sign_in: SignIn, cli_env: dict[str, str]
) -> None:
    await add_user(engine, "ann", "support")
    _, request_id = await refund_request(engine)
    ann = sign_in("ann")
    csrf = csrf_of(ann.get(f"/requests/{request_id}").text)
    disabled = await invoke(cli_env, "users", "disable", "ann")
    assert disabled.code == 0, disabled.stderr
    assert "web sessions have ended" in disabled.stdout
    # No waiting: a decision asks the database, never the page views' cache.
    approve = ann.post(f"/requests/{request_id}/approve", data={"csrf": csrf})
    assert approve.status_code == 303
    assert approve.headers["location"].startswith("/login")
    assert await scalar(engine, "select count(*) from decisions") == 0
    request = await engine.requests.get(request_id)
    assert request is not None
    assert request.status.value == "pending"


async def test_a_session_ended_by_a_group_change_cannot_decide_for_the_old_group(
    server: Server, engine: Engine, sign_in: SignIn, cli_env: dict[str, str]
) -> None:
    await add_user(engine, "ann", "support")
    _, request_id = await refund_request(engine)  # support's to decide
    ann = sign_in("ann")
    csrf = csrf_of(ann.get(f"/requests/{request_id}").text)
    moved = await invoke(cli_env, "users", "groups", "ann", "--group", "finance", "--json")
    assert moved.code == 0, moved.stderr
    assert '"finance"' in moved.stdout
    approve = ann.post(f"/requests/{request_id}/approve", data={"csrf": csrf})
    assert approve.status_code == 303
    assert approve.headers["location"].startswith("/login")
    assert await scalar(engine, "select count(*) from decisions") == 0
    # Signed in again, ann is who the account now says: finance, not support.
    again = sign_in("ann")
    assert again.get(f"/requests/{request_id}").status_code == 404
    assert await scalar(engine, "select groups from web_sessions") == ["finance"]


async def test_a_sign_in_that_read_the_groups_before_a_change_gets_no_session(
    engine: Engine,
) -> None:
    # Sign-in reads the account, checks the password (scrypt: about 0.1 s), then stores the
    # session with the groups it read; a change of groups committed meanwhile ended only the
    # sessions already stored, and this one kept the removed group until it expired.
    await add_user(engine, "ann", "support")
    as_read = await engine.accounts.authenticate("ann", PASSWORD)
    assert as_read is not None
    assert await engine.accounts.set_groups("ann", ["finance"], by="test") is not None
    await engine.sessions.start("ann-session", as_read, ttl_seconds=600)
    assert await engine.sessions.get("ann-session") is None
    current = await engine.accounts.authenticate("ann", PASSWORD)
    assert current is not None
    await engine.sessions.start("ann-again", current, ttl_seconds=600)
    again = await engine.sessions.get("ann-again")
    assert again is not None
    assert again.principal.groups == frozenset({"finance"})


async def test_group_changes_are_checked_and_audited(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    await add_user(engine, "ann", "support")
    none = await invoke(cli_env, "users", "groups", "ann")
    bad = await invoke(cli_env, "users", "groups", "ann", "--group", "Not A Group")
    missing = await invoke(cli_env, "users", "groups", "nobody", "--group", "finance")
    assert (none.code, bad.code, missing.code) == (2, 2, 4)
    ok = await invoke(cli_env, "users", "groups", "ann", "--group", "finance", "--group", "ops")
    assert ok.code == 0, ok.stderr
    kinds = await scalar(
        engine, "select array_agg(kind order by id) from audit_events where kind like 'account.%%'"
    )
    assert kinds == ["account.created", "account.groups_changed"]


async def test_the_table_keeps_a_hash_of_the_session_id_never_the_id(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "ann", "support")
    cookie = sign_in("ann").cookies[SESSION_COOKIE]
    key = revealed(server.settings.secret_key) or ""
    sid = URLSafeTimedSerializer(key, salt="approvals.session.v2").loads(cookie)["sid"]
    stored = await scalar(engine, "select id_hash from web_sessions")
    assert stored == hashlib.sha256(sid.encode()).hexdigest()
    dump = await scalar(engine, "select string_agg(t::text, ' ') from web_sessions t")
    assert sid not in dump


async def test_operators_list_and_end_a_principals_sessions(
    server: Server, engine: Engine, sign_in: SignIn, cli_env: dict[str, str]
) -> None:
    await add_user(engine, "ann", "support")
    await add_user(engine, "bob", "support")
    _, request_id = await refund_request(engine)
    ann, bob = sign_in("ann"), sign_in("bob")
    csrf = csrf_of(ann.get(f"/requests/{request_id}").text)
    listed = await invoke(cli_env, "sessions", "list", "--json")
    assert listed.code == 0, listed.stderr
    assert "local:ann" in listed.stdout
    assert "local:bob" in listed.stdout
    assert "id_hash" not in listed.stdout
    ended = await invoke(cli_env, "sessions", "end", "local:ann")
    assert ended.code == 0, ended.stderr
    assert "1 web session of local:ann ended" in ended.stdout
    assert (await invoke(cli_env, "sessions", "end", "ann")).code == 2
    refused = ann.post(f"/requests/{request_id}/approve", data={"csrf": csrf})
    assert refused.headers["location"].startswith("/login")
    assert bob.get("/").status_code == 200  # only ann's sessions ended
    assert await scalar(engine, "select count(*) from decisions") == 0
    audited = await scalar(
        engine, "select data->>'principal' from audit_events where kind = 'sessions.ended'"
    )
    assert audited == "local:ann"


async def test_signing_in_again_ends_the_browsers_previous_session(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "ann", "support")
    ann = sign_in("ann")
    with saved(server, ann) as copy:
        assert login(ann, "ann").status_code == 303  # the same browser signs in again
        assert copy.get("/").status_code == 303  # the previous cookie names nothing now
    assert ann.get("/").status_code == 200
    assert await scalar(engine, "select count(*) from web_sessions") == 1
