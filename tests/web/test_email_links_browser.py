"""A one-time e-mail link in a real browser (Debian's chromium through Playwright): opening it,
as an approver clicking it in their mail does, decides nothing; the page's button decides. This
proves the form's cookie (SameSite=Strict, set by the page) and origin check let the real
browser's post through, where test_email_links.py checks the same over plain HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from playwright.async_api import Browser, async_playwright, expect

from approvals.model import RequestStatus
from tests.web.browser import launch_chromium
from tests.web.test_email_links import accounts, served, status_of, waiting_refund
from web.engine import Engine
from web.settings import Settings


@pytest_asyncio.fixture(loop_scope="session")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        chromium = await launch_chromium(playwright)
        yield chromium
        await chromium.close()


async def test_a_link_opened_in_a_browser_decides_only_when_its_button_is_pressed(
    engine: Engine, settings: Settings, browser: Browser
) -> None:
    await accounts(engine)
    async with served(engine, settings) as app:
        request_id = await waiting_refund(engine, app)
        link = app.links_of("bob@example.com")["approve"]
        context = await browser.new_context()
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(link)
        await expect(page.get_by_role("button", name="Approve as bob")).to_be_visible()
        await page.wait_for_timeout(300)  # whatever the page might do by itself, it has done
        assert await status_of(engine, request_id) is RequestStatus.PENDING

        await page.get_by_role("button", name="Approve as bob").click()
        await expect(page.get_by_role("heading", name="Approved")).to_be_visible()
        assert await status_of(engine, request_id) is RequestStatus.APPROVED

        await page.goto(link)
        await expect(page.get_by_role("heading", name="This link was already used")).to_be_visible()
        await context.close()
        assert errors == []
