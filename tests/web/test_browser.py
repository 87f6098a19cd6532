"""The approvers' flows in a real browser (Debian's chromium through Playwright) against the
app under uvicorn with its resume worker: sign in, approve, reject, edit, live updates, and
shown parameters that try to run script. test_pages.py covers the same flows over plain HTTP;
these prove they work where an approver meets them, with the CSP on and our script running.
The screenshots in docs/screenshots/ are taken here."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest_asyncio
from playwright.async_api import Browser, async_playwright, expect

from tests.web.browser import Watched, launch_chromium, open_page, reload_until_run_is, screenshot
from tests.web.browser import sign_in as sign_in_with_browser
from tests.web.conftest import Server, add_user
from web.engine import Engine

XSS_SCRIPT = "<script>alert(1)</script>"
XSS_IMG = "<img src=x onerror=alert(1)>"


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser() -> AsyncIterator[Browser]:
    # One chromium for the session (launching costs about a second); each test gets a fresh
    # context, so no cookie or storage crosses from one test to the next.
    async with async_playwright() as playwright:
        chromium = await launch_chromium(playwright)
        yield chromium
        await chromium.close()


@pytest_asyncio.fixture(loop_scope="session")
async def watched(browser: Browser) -> AsyncIterator[Watched]:
    w = await open_page(browser)
    yield w
    await w.page.context.close()


async def refund_request(engine: Engine) -> tuple[str, str]:
    out = await engine.runner.start("refund", {"message": "refund 1001"}, principal="local:shop")
    assert out.status == "waiting", out
    return out.run_id, out.pending[0]


async def test_sign_in_open_from_the_inbox_approve_and_the_run_completes(
    server: Server, engine: Engine, watched: Watched
) -> None:
    page = watched.page
    await add_user(engine, "ann", "support")
    run_id, request_id = await refund_request(engine)
    await sign_in_with_browser(page, server, "ann")

    row = page.locator("table.list tbody tr", has=page.locator(f'a[href="/requests/{request_id}"]'))
    await expect(row).to_contain_text("issue_refund")
    await expect(row).to_contain_text("local:shop")
    await row.get_by_role("link", name="Review").click()
    await page.wait_for_url(f"{server.url}/requests/{request_id}")
    await expect(page.locator("h1")).to_contain_text("pending")
    await expect(page.locator("table.args")).to_contain_text("customer request")
    await screenshot(page, "detail")

    await page.click("#approve")
    await page.wait_for_url(f"{server.url}/requests/{request_id}")
    await expect(page.locator("h1")).to_contain_text("approved")
    await expect(page.get_by_role("heading", name="What happened after")).to_be_visible()
    await reload_until_run_is(page, "completed")
    await expect(page.locator("main")).to_contain_text("local:ann")
    assert len(await engine.effects.for_call(run_id, "refund-1001")) == 1
    await watched.assert_quiet()


async def test_reject_asks_for_a_reason_then_records_it(
    server: Server, engine: Engine, watched: Watched
) -> None:
    page = watched.page
    await add_user(engine, "ann", "support")
    run_id, request_id = await refund_request(engine)
    await sign_in_with_browser(page, server, "ann")
    await page.goto(f"{server.url}/requests/{request_id}")

    await page.click("#reject")
    await expect(page.get_by_role("alert")).to_have_text("A rejection needs a reason.")
    await expect(page.locator("h1")).to_contain_text("pending")

    await page.fill("#reason", "refund already paid by bank transfer")
    await page.click("#reject")
    await expect(page.locator("h1")).to_contain_text("rejected")
    await expect(page.locator("main")).to_contain_text("refund already paid by bank transfer")
    await reload_until_run_is(page, "completed")
    assert await engine.effects.for_call(run_id, "refund-1001") == []
    await watched.assert_quiet()


async def test_edit_shows_errors_inline_then_a_diff_then_runs_the_edited_call(
    server: Server, engine: Engine, watched: Watched
) -> None:
    page = watched.page
    await add_user(engine, "ann", "support")
    run_id, request_id = await refund_request(engine)
    found = await engine.requests.get(request_id)
    assert found is not None
    proposed = str(found.shown["args"]["amount"])
    await sign_in_with_browser(page, server, "ann")
    await page.goto(f"{server.url}/requests/{request_id}")

    await page.get_by_role("button", name="Edit, then approve…").click()
    await expect(page.locator("h1")).to_contain_text("Edit issue_refund, then approve")
    amount = page.locator("#arg-amount")
    await expect(amount).to_have_value(proposed)

    # Not a number: refused by the form, before anything is decided.
    await amount.fill("lots")
    await page.click("#preview")
    field = page.locator(".field.invalid", has=amount)
    await expect(field.get_by_role("alert")).to_contain_text("is not a valid number")
    await expect(page.locator("#confirm")).to_have_count(0)

    # A number above the schema's maximum: refused when approving, still on the form.
    await amount.fill("20000")
    await page.click("#preview")
    await page.click("#confirm")
    await expect(field.get_by_role("alert")).to_contain_text("greater than the maximum of 10000")
    await expect(page.locator("#confirm")).to_have_count(0)

    await amount.fill("12.5")
    await page.click("#preview")
    await expect(page.locator(".error")).to_have_count(0)
    changed = page.locator("table.diff tr.changed")
    await expect(changed).to_have_count(1)
    await expect(changed.locator("th")).to_have_text("amount")
    await expect(changed.locator("td").nth(0)).to_have_text(proposed)
    await expect(changed.locator("td").nth(1)).to_have_text("12.5")
    await screenshot(page, "edit")

    await page.get_by_role("button", name="Approve with these arguments").click()
    await page.wait_for_url(f"{server.url}/requests/{request_id}")
    await expect(page.locator("h1")).to_contain_text("approved")
    await reload_until_run_is(page, "completed")
    effects = await engine.effects.for_call(run_id, "refund-1001")
    assert [e["args"]["amount"] for e in effects] == [12.5]
    await watched.assert_quiet()


async def test_shown_parameters_that_try_to_run_script_are_shown_as_text(
    server: Server, engine: Engine, watched: Watched
) -> None:
    page = watched.page
    await add_user(engine, "cleo", "communications")
    out = await engine.runner.start(
        "email",
        {"message": f"Email bob@example.com about {XSS_SCRIPT} {XSS_IMG}"},
        principal="local:shop",
    )
    assert out.status == "waiting", out
    request_id = out.pending[0]
    found = await engine.requests.get(request_id)
    assert found is not None
    await sign_in_with_browser(page, server, "cleo")

    # A fake clock near the request's expiry: our countdown (app.js) then shows minutes and
    # seconds, a format the server never renders, and must tick once a second.
    await page.clock.install(time=found.expires_at - timedelta(seconds=100))
    await page.goto(f"{server.url}/requests/{request_id}")
    shown = page.locator("section.card", has=page.get_by_role("heading", name="What will run"))
    text = await shown.text_content() or ""
    assert XSS_SCRIPT in text
    assert XSS_IMG in text
    assert await page.locator("main img, main script").count() == 0
    # Time for an injected handler to have fired, had there been one.
    await page.wait_for_timeout(500)

    countdown = page.locator("[data-expires]")
    await page.clock.pause_at(found.expires_at - timedelta(seconds=90))
    await expect(countdown).to_have_text("1 min 30 s")
    await page.clock.run_for(2000)
    await expect(countdown).to_have_text("1 min 28 s")
    await watched.assert_quiet()


async def test_the_inbox_shows_a_new_request_by_itself(
    server: Server, engine: Engine, watched: Watched
) -> None:
    page = watched.page
    await add_user(engine, "ann", "support", "communications")
    _, first = await refund_request(engine)
    async with page.expect_response(f"{server.url}/events"):
        await sign_in_with_browser(page, server, "ann")
    await expect(page.locator(f'a[href="/requests/{first}"]')).to_have_count(2)
    # The stream takes its first mark right after it opens; a change before that would
    # already be in the page.
    await page.wait_for_timeout(300)

    out = await engine.runner.start(
        "email", {"message": "Email bob@example.com about the refund"}, principal="local:shop"
    )
    assert out.status == "waiting", out
    new = page.locator(f'a[href="/requests/{out.pending[0]}"]').first
    await expect(new).to_be_visible(timeout=10_000)
    # The count moves with the list: a change the process heard of drops its cached count.
    await expect(page.locator("p.counts")).to_contain_text("2 pending you may see")
    await screenshot(page, "inbox")
    await watched.assert_quiet()


async def test_the_api_docs_render_their_operations_under_the_csp(
    server: Server, watched: Watched
) -> None:
    page = watched.page
    response = await page.goto(server.url + "/api/docs")
    assert response is not None
    csp = response.headers["content-security-policy"]
    assert "unsafe-inline" not in csp
    assert "script-src 'self'" in csp
    # Swagger UI, from the installed package, lists the API's operations.
    operations = page.locator(".opblock")
    await expect(operations.first).to_be_visible()
    assert await operations.count() >= 5
    await expect(page.locator(".opblock-summary-path").first).to_contain_text("/api/v1/")
    await watched.assert_quiet()
