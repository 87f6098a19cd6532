"""`approvals serve` and the demo's web app, as real processes."""

from __future__ import annotations

import asyncio
import re
import signal

import httpx

from tests.integration.helpers import side_effects
from tests.integration.processes import spawn
from web.engine import Engine


async def read_until(stream: asyncio.StreamReader, pattern: str, seen: list[str]) -> re.Match[str]:
    while True:
        line = (await asyncio.wait_for(stream.readline(), 120)).decode()
        assert line, f"the process ended early: {''.join(seen)}"
        seen.append(line)
        found = re.search(pattern, line)
        if found:
            return found


async def test_serve_answers_until_terminated(cli_env: dict[str, str]) -> None:
    server = await spawn(cli_env, "serve", "--port", "0")
    assert server.stdout is not None
    seen: list[str] = []
    url = (await read_until(server.stdout, r"serving (http://\S+)", seen)).group(1)
    async with httpx.AsyncClient(base_url=url) as client:
        login = await client.get("/login")
        api = await client.get("/api/v1/pending")
    assert login.status_code == 200
    assert "content-security-policy" in login.headers
    assert api.status_code == 401
    server.send_signal(signal.SIGTERM)
    await asyncio.wait_for(server.wait(), 30)
    assert server.returncode == 0


async def test_the_demo_can_be_decided_in_its_web_app(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    demo = await spawn(cli_env, "demo", "--port", "0")
    assert demo.stdout is not None
    seen: list[str] = []
    found = await read_until(
        demo.stdout, r"web app: (http://[^/\s]+)/requests/([0-9a-f-]{36})", seen
    )
    url, request_id = found.group(1), found.group(2)
    login = await read_until(demo.stdout, r"sign in as (\S+) with password (\S+)", seen)
    user, password = login.group(1), login.group(2)
    async with httpx.AsyncClient(base_url=url, headers={"origin": url}) as browser:
        form = await browser.get("/login")
        token = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert token is not None  # the sign-in form's own CSRF token
        signed = await browser.post(
            "/login", data={"username": user, "password": password, "csrf": token.group(1)}
        )
        assert signed.status_code == 303, signed.text
        page = await browser.get(f"/requests/{request_id}")
        assert page.status_code == 200
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf is not None
        done = await browser.post(f"/requests/{request_id}/approve", data={"csrf": csrf.group(1)})
        assert done.status_code == 303
    rest, _ = await asyncio.wait_for(demo.communicate(), 120)
    assert demo.returncode == 0, rest.decode()
    assert "is completed" in rest.decode()
    request = await engine.requests.get(request_id)
    assert request is not None
    assert len(await side_effects(engine, request.run_id, request.call_id)) == 1
