"""Several web processes on one database allow, together, no more password guesses than one
does: the sign-in throttle's counts are kept in PostgreSQL (issue 30, item 7)."""

from __future__ import annotations

import httpx

from tests.web.conftest import PASSWORD, add_user, login_csrf_of, serving
from web.engine import Engine
from web.settings import Settings


def guess(server_url: str, password: str) -> int:
    """One sign-in attempt as ann, from a fresh browser, at one web process."""
    with httpx.Client(base_url=server_url, headers={"origin": server_url}) as c:
        token = login_csrf_of(c.get("/login").text)
        form = {"username": "ann", "password": password, "csrf": token}
        return c.post("/login", data=form).status_code


async def test_two_web_processes_together_allow_no_more_guesses_than_the_limit(
    web_settings: Settings, engine: Engine
) -> None:
    await add_user(engine, "ann", "support")
    attempts = web_settings.login_attempts
    with serving(web_settings) as one, serving(web_settings) as two:
        codes = [guess((one, two)[i % 2].url, "wrong") for i in range(2 * attempts + 2)]
        assert codes == [401] * attempts + [429] * (attempts + 2)
        # Ann herself, with the right password, is held back at both until the window ends.
        assert guess(one.url, PASSWORD) == 429
        assert guess(two.url, PASSWORD) == 429
