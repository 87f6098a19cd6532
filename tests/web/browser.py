"""Driving the approvers' pages in a real browser: Debian's chromium through Playwright.

Browser downloads do not work on our machines, so Playwright launches the system chromium
(``/usr/bin/chromium``, installed by ``.ci/run`` in CI) instead of one it manages itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.async_api import (
    Browser,
    ConsoleMessage,
    Dialog,
    Page,
    Playwright,
    ViewportSize,
)

from tests.conftest import ROOT
from tests.web.conftest import PASSWORD, Server

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = ROOT / "docs" / "screenshots"
# A fixed viewport keeps the screenshots the same size from run to run.
VIEWPORT = ViewportSize(width=1200, height=800)

# Runs before any page script, outside the page's CSP: records every violation the policy
# reports, so a test can tell that the policy had nothing to block (no injected markup ran
# into it, and our own script was never refused).
RECORD_CSP_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(e.violatedDirective + " " + (e.blockedURI || "inline"));
});
"""


async def launch_chromium(playwright: Playwright) -> Browser:
    """The system chromium, headless. Missing, the test fails: skipping would let CI pass
    without ever opening a browser."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: the browser tests need Debian's chromium "
            "(apt-get install chromium; .ci/run installs it in CI)",
            pytrace=False,
        )
    # --no-sandbox: CI runs as root, where chromium's sandbox refuses to start.
    return await playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
    )


@dataclass
class Watched:
    """A page plus what it must never do: open a dialog, log an error, throw."""

    page: Page
    dialogs: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    async def csp_violations(self) -> list[str]:
        found: list[str] = await self.page.evaluate("window.__cspViolations || []")
        return found

    async def assert_quiet(self) -> None:
        assert self.dialogs == [], f"the page opened dialogs: {self.dialogs}"
        assert self.page_errors == [], f"scripts threw: {self.page_errors}"
        assert self.console_errors == [], f"console errors: {self.console_errors}"
        assert await self.csp_violations() == []


async def open_page(browser: Browser) -> Watched:
    context = await browser.new_context(viewport=VIEWPORT)
    # Every step here takes well under a second; a stuck one fails fast, not after 30 s.
    context.set_default_timeout(10_000)
    await context.add_init_script(RECORD_CSP_VIOLATIONS)
    page = await context.new_page()
    watched = Watched(page)

    async def on_dialog(dialog: Dialog) -> None:
        watched.dialogs.append(f"{dialog.type}: {dialog.message}")
        await dialog.dismiss()

    def on_console(message: ConsoleMessage) -> None:
        url = message.location.get("url", "")
        # A page answered 4xx on purpose (a refused form), or the favicon we do not serve,
        # is logged as a failed load too; a failed load of our own assets is an error.
        if message.type == "error" and (
            not message.text.startswith("Failed to load resource") or "/static/" in url
        ):
            watched.console_errors.append(f"{message.text} ({url})")

    page.on("dialog", on_dialog)
    page.on("console", on_console)
    page.on("pageerror", lambda error: watched.page_errors.append(str(error)))
    return watched


async def sign_in(page: Page, server: Server, name: str) -> None:
    """Through the login form, as a person would: the inbox sends us there first."""
    await page.goto(server.url + "/")
    assert "/login" in page.url
    await page.fill("input[name=username]", name)
    await page.fill("input[name=password]", PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url(server.url + "/")


async def reload_until_run_is(page: Page, status: str, timeout: float = 20) -> None:
    """The worker inside the server resumes the run in the background: reload the detail
    page until "What happened after" shows ``status``."""
    deadline = time.monotonic() + timeout
    shown = ""
    while time.monotonic() < deadline:
        shown = (await page.locator("#run-status").text_content() or "").strip()
        if shown == status:
            return
        await page.wait_for_timeout(200)
        await page.reload()
    raise AssertionError(f"the run never showed {status!r} (last: {shown!r})")


async def screenshot(page: Page, name: str) -> None:
    """Overwrites ``docs/screenshots/<name>.png``: the docs show what the tests saw."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=SCREENSHOTS / f"{name}.png")
