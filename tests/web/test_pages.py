"""The pages over real HTTP (no browser): sign-in, sessions, CSRF, who sees and decides what,
and what the pages escape. The browser tests (test_browser.py) drive the same flows in
chromium."""

from __future__ import annotations

import re
import time
from html import unescape

import httpx
from itsdangerous import TimestampSigner, URLSafeTimedSerializer

from tests.integration.helpers import scalar
from tests.waiting import eventually
from tests.web.conftest import Server, SignIn, add_user, csrf_of, login
from web.engine import Engine
from web.security import SESSION_COOKIE
from web.settings import revealed

XSS = "<script>alert(1)</script> <img src=x onerror=alert(1)>"


async def refund_request(engine: Engine, started_by: str = "local:shop") -> tuple[str, str]:
    out = await engine.runner.start("refund", {"message": "refund 1001"}, principal=started_by)
    return out.run_id, out.pending[0]


async def wait_for(engine: Engine, run_id: str, status: str) -> None:
    async def reached() -> bool:
        run = await engine.runs.get(run_id)
        return run is not None and run.status == status

    await eventually(reached, what=f"run {run_id} to be {status}")


async def test_sign_in_wrong_password_and_throttling(server: Server, engine: Engine) -> None:
    await add_user(engine, "ann", "support")
    with httpx.Client(base_url=server.url, headers={"origin": server.url}, timeout=30) as c:
        assert c.get("/").status_code == 303  # not signed in: to the login page
        assert c.get("/login").status_code == 200
        wrong = [login(c, "ann", "nope").status_code for _ in range(3)]
        throttled = login(c, "ann")
    assert wrong == [401, 401, 401]
    assert throttled.status_code == 429
    assert "Too many failed sign-ins" in throttled.text


async def test_sessions_are_signed_and_bounded(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "ann", "support")
    c = sign_in("ann")
    cookie = c.cookies[SESSION_COOKIE]
    response = login(c, "ann")
    set_cookie = next(v for v in response.headers.get_list("set-cookie") if SESSION_COOKIE in v)
    assert "HttpOnly" in set_cookie
    assert "SameSite=lax" in set_cookie.replace("Lax", "lax")
    assert "Max-Age=" in set_cookie
    assert c.cookies[SESSION_COOKIE] != cookie  # a new session on every sign-in
    assert c.get("/").status_code == 200
    # Tampered: one character changed.
    tampered = cookie[:-2] + ("A" if cookie[-2] != "A" else "B") + cookie[-1]
    with httpx.Client(base_url=server.url, cookies={SESSION_COOKIE: tampered}) as t:
        assert t.get("/").status_code == 303
    # Forged with another key, claiming to be an operator.
    forged = URLSafeTimedSerializer("another-key-" + "y" * 32, salt="approvals.session").dumps(
        {
            "sid": "x",
            "p": {"id": "local:eve", "name": "eve", "via": "password", "groups": ["operators"]},
        }
    )
    # Signed with the right key but naming no session: only a session row signs anyone in.
    unknown = URLSafeTimedSerializer(
        revealed(server.settings.secret_key) or "", salt="approvals.session.v2"
    ).dumps({"sid": "not-a-session"})
    for value in (forged, unknown):
        with httpx.Client(base_url=server.url, cookies={SESSION_COOKIE: value}) as f:
            assert f.get("/").status_code == 303


async def test_an_expired_session_cookie_is_refused(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "ann", "support")
    key = revealed(server.settings.secret_key) or ""
    cookie = sign_in("ann").cookies[SESSION_COOKIE]
    sid = URLSafeTimedSerializer(key, salt="approvals.session.v2").loads(cookie)["sid"]

    # itsdangerous stamps the time at signing: sign with a timestamp beyond the lifetime.
    class Past(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(time.time()) - server.settings.session_ttl_seconds - 60

    stale = URLSafeTimedSerializer(key, salt="approvals.session.v2", signer=Past).dumps(
        {"sid": sid}
    )
    with httpx.Client(base_url=server.url, cookies={SESSION_COOKIE: cookie}) as fresh:
        assert fresh.get("/").status_code == 200
    with httpx.Client(base_url=server.url, cookies={SESSION_COOKIE: stale}) as expired:
        response = expired.get("/")
    assert response.status_code == 303
    assert response.headers["location"].startswith("/login")


async def test_approve_from_the_inbox_and_the_run_completes(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "ann", "support")
    run_id, request_id = await refund_request(engine)
    c = sign_in("ann")
    inbox = c.get("/")
    assert f"/requests/{request_id}" in inbox.text
    page = c.get(f"/requests/{request_id}")
    assert "issue_refund" in page.text
    assert "customer request" in page.text
    done = c.post(f"/requests/{request_id}/approve", data={"csrf": csrf_of(page.text)})
    assert done.status_code == 303
    await wait_for(engine, run_id, "completed")
    after = c.get(f"/requests/{request_id}")
    assert "approve" in after.text
    assert "local:ann" in after.text
    assert "completed" in after.text
    history = c.get("/history").text
    assert f"/requests/{request_id}" in history
    row = history[history.index(f"/requests/{request_id}") :]
    assert "approve" in row
    assert "local:ann" in row
    assert "succeeded" in row  # what happened after: the tool ran
    assert await scalar(engine, "select count(*) from demo_side_effects") == 1


async def test_forms_need_the_csrf_token_and_our_origin(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "ann", "support")
    _, request_id = await refund_request(engine)
    c = sign_in("ann")
    csrf = csrf_of(c.get(f"/requests/{request_id}").text)
    missing = c.post(f"/requests/{request_id}/approve", data={})
    wrong = c.post(f"/requests/{request_id}/approve", data={"csrf": csrf[:-3] + "abc"})
    other_origin = c.post(
        f"/requests/{request_id}/approve",
        data={"csrf": csrf},
        headers={"origin": "https://evil.example"},
    )
    # Another session's token does not fit this session.
    d = sign_in("ann")
    foreign = c.post(f"/requests/{request_id}/approve", data={"csrf": csrf_of(d.get("/").text)})
    for response in (missing, wrong, other_origin, foreign):
        assert response.status_code == 403, response.text
    assert await scalar(engine, "select count(*) from decisions") == 0


async def test_other_groups_see_404_and_the_starter_sees_403(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "fin", "finance")
    await add_user(engine, "shop", "support")
    _, request_id = await refund_request(engine, started_by="local:shop")
    f = sign_in("fin")
    assert request_id not in f.get("/").text
    hidden = f.get(f"/requests/{request_id}")
    forged = f.get("/requests/not-a-request")
    assert hidden.status_code == forged.status_code == 404
    csrf = csrf_of(f.get("/").text)
    assert f.post(f"/requests/{request_id}/approve", data={"csrf": csrf}).status_code == 404
    s = sign_in("shop")
    inbox = s.get("/").text
    # Not in the starter's inbox, only in what it may see but not decide.
    assert "Nothing is waiting for you." in inbox
    assert "You may see but not decide" in inbox
    assert f"/requests/{request_id}" in inbox
    page = s.get(f"/requests/{request_id}")
    assert page.status_code == 200
    assert "separation of duties" in page.text
    refused = s.post(f"/requests/{request_id}/approve", data={"csrf": csrf_of(page.text)})
    assert refused.status_code == 403
    assert await scalar(engine, "select count(*) from decisions") == 0


async def test_reject_needs_a_reason(server: Server, engine: Engine, sign_in: SignIn) -> None:
    await add_user(engine, "ann", "support")
    run_id, request_id = await refund_request(engine)
    c = sign_in("ann")
    csrf = csrf_of(c.get(f"/requests/{request_id}").text)
    empty = c.post(f"/requests/{request_id}/reject", data={"csrf": csrf, "reason": "  "})
    assert empty.status_code == 422
    assert "A rejection needs a reason." in empty.text
    done = c.post(f"/requests/{request_id}/reject", data={"csrf": csrf, "reason": "fraud"})
    assert done.status_code == 303
    await wait_for(engine, run_id, "completed")
    assert "fraud" in c.get(f"/requests/{request_id}").text
    assert await scalar(engine, "select count(*) from demo_side_effects") == 0


async def test_edit_shows_errors_then_a_diff_then_approves(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "ann", "support")
    run_id, request_id = await refund_request(engine)
    c = sign_in("ann")
    csrf = csrf_of(c.get(f"/requests/{request_id}").text)
    base = {"csrf": csrf, "arg.order_id": "1001", "arg.reason": "partial"}
    bad = c.post(f"/requests/{request_id}/edit", data={**base, "arg.amount": "lots"})
    assert bad.status_code == 422
    assert "is not a valid number" in bad.text
    assert 'value="lots"' in bad.text  # what was typed stays in the field
    too_big = c.post(
        f"/requests/{request_id}/edit", data={**base, "arg.amount": "20000", "confirm": "1"}
    )
    assert too_big.status_code == 422
    assert "greater than the maximum of 10000" in too_big.text
    preview = c.post(f"/requests/{request_id}/edit", data={**base, "arg.amount": "12.5"})
    assert preview.status_code == 200
    assert re.search(r'<tr class="changed"><th>amount</th>', preview.text)
    confirmed = c.post(
        f"/requests/{request_id}/edit", data={**base, "arg.amount": "12.5", "confirm": "1"}
    )
    assert confirmed.status_code == 303
    await wait_for(engine, run_id, "completed")
    effects = await engine.effects.for_call(run_id, "refund-1001")
    assert [e["args"]["amount"] for e in effects] == [12.5]


async def test_shown_parameters_are_text_not_markup(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "cleo", "communications")
    out = await engine.runner.start(
        "email", {"message": f"Email bob@example.com about {XSS}"}, principal="local:shop"
    )
    assert out.status == "waiting", out
    c = sign_in("cleo")
    page = c.get(f"/requests/{out.pending[0]}")
    assert "<script>alert(1)</script>" not in page.text
    assert "<img src=x" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    csp = page.headers["content-security-policy"]
    assert "default-src 'self'" in csp
    assert "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "same-origin"


async def test_logout_ends_the_session(server: Server, engine: Engine, sign_in: SignIn) -> None:
    await add_user(engine, "ann", "support")
    c = sign_in("ann")
    out = c.post("/logout", data={"csrf": csrf_of(c.get("/").text)})
    assert out.status_code == 303
    assert c.get("/").status_code == 303


async def test_open_redirects_are_refused(server: Server, engine: Engine) -> None:
    await add_user(engine, "ann", "support")
    with httpx.Client(base_url=server.url, headers={"origin": server.url}, timeout=30) as c:
        response = login(c, "ann", next="//evil.example/x")
    assert response.status_code == 303
    assert response.headers["location"] == "/"


def hidden_fields(html: str, form_action: str) -> dict[str, str]:
    """The named inputs of the form posting to ``form_action``, as a browser would send them."""
    start = html.index(f'action="{form_action}"')
    form = html[start : html.index("</form>", start)]
    return {
        unescape(name): unescape(value)
        for name, value in re.findall(r'<input[^>]*?name="([^"]+)" value="([^"]*)"', form, re.S)
    }


async def test_the_edit_form_shows_hidden_characters_escaped_and_keeps_them(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "cleo", "communications")
    sneaky = "invoice\u202efdp.exe\u200b"
    out = await engine.runner.start(
        "email", {"message": f"Email bob@example.com about {sneaky}"}, principal="local:shop"
    )
    request_id = out.pending[0]
    c = sign_in("cleo")
    detail = c.get(f"/requests/{request_id}").text
    assert "\\u202efdp.exe" in detail  # the detail page shows it escaped: so must the edit page
    edit = f"/requests/{request_id}/edit"
    page = c.post(edit, data=hidden_fields(detail, edit))
    assert page.status_code == 200, page.text
    assert "\u202e" not in page.text
    assert "\u200b" not in page.text
    assert "\\u202efdp.exe\\u200b" in page.text
    assert 'data-escaped="subject"' in page.text
    # Posted back, the escaped text stands for the same text (no change), and runs as it.
    again = c.post(edit, data=hidden_fields(page.text, edit))
    assert again.status_code == 200, again.text
    assert '<tr class="changed">' not in again.text
    done = c.post(edit, data={**hidden_fields(again.text, edit), "confirm": "1"})
    assert done.status_code == 303, done.text
    await wait_for(engine, out.run_id, "completed")
    request = await engine.requests.get(request_id)
    assert request is not None
    effects = await engine.effects.for_call(out.run_id, request.call_id)
    assert len(effects) == 1
    assert sneaky in effects[0]["args"]["subject"]


async def test_escaped_text_that_is_no_quoted_string_is_a_field_error_never_a_500(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "ann", "support")
    _, request_id = await refund_request(engine)
    c = sign_in("ann")
    csrf = csrf_of(c.get(f"/requests/{request_id}").text)
    base = {"csrf": csrf, "arg.amount": "12.5", "arg.reason": "partial", "enc.order_id": "json"}
    # Nested past the parser's recursion limit (once a 500), a number, an unclosed string.
    for typed_text in ("[" * 5000 + "]" * 5000, "1001", '"1001'):
        page = c.post(f"/requests/{request_id}/edit", data={**base, "arg.order_id": typed_text})
        assert page.status_code == 422, (typed_text[:20], page.status_code, page.text[:300])
        assert "is not escaped text" in page.text
    request = await engine.requests.get(request_id)
    assert request is not None
    assert request.status.value == "pending"


async def test_the_detail_page_shows_the_runs_answer_to_an_operator_not_to_its_approver(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "ann", "support")
    await add_user(engine, "opal", "operators")
    run_id, request_id = await refund_request(engine)
    ann = sign_in("ann")
    page = ann.get(f"/requests/{request_id}")
    done = ann.post(f"/requests/{request_id}/approve", data={"csrf": csrf_of(page.text)})
    assert done.status_code == 303, done.text
    await wait_for(engine, run_id, "completed")
    run = await engine.runs.get(run_id)
    assert run is not None
    assert run.answer
    assert "completed" in (approver := ann.get(f"/requests/{request_id}").text)
    assert run.answer not in approver
    assert run.answer in sign_in("opal").get(f"/requests/{request_id}").text


async def test_a_cleared_optional_field_shows_and_runs_its_default(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "ann", "support")
    run_id, request_id = await refund_request(engine)
    c = sign_in("ann")
    csrf = csrf_of(c.get(f"/requests/{request_id}").text)
    form = {"csrf": csrf, "arg.order_id": "1001", "arg.amount": "12.5", "arg.reason": ""}
    preview = c.post(f"/requests/{request_id}/edit", data=form)
    assert preview.status_code == 200, preview.text
    row = re.search(r"<th>reason</th>.*?</tr>", preview.text, re.S)
    assert row is not None
    assert "null" not in row.group(0)
    assert "&#34;customer request&#34;" in row.group(0) or '"customer request"' in row.group(0)
    assert "the default" in row.group(0)
    done = c.post(f"/requests/{request_id}/edit", data={**form, "confirm": "1"})
    assert done.status_code == 303, done.text
    await wait_for(engine, run_id, "completed")
    _, decision = await engine.requests.decision_of(request_id)
    assert decision is not None
    assert decision.args is not None
    assert decision.args["reason"] == "customer request"  # what the confirmation showed
    effects = await engine.effects.for_call(run_id, "refund-1001")
    assert [e["args"]["reason"] for e in effects] == ["customer request"]
