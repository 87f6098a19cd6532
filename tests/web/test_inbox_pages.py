"""The lists over real HTTP: ``GET /api/v1/pending`` pages by the ``Link`` header and the inbox
and history pages by their next-page links; an approver following them reaches every request
it may decide among many other groups'; a forged cursor or a bad filter is a 4xx, never 500."""

from __future__ import annotations

import base64
import json
import re
from html import unescape

import httpx

from bench.inbox_scale import GROUPS, load_requests
from tests.integration.helpers import person_token
from tests.web.conftest import Server, SignIn, add_user
from web.engine import Engine

TEAM = GROUPS[3]
ROWS = 1200


def b64decode_url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64encode_url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


async def decidable_by(engine: Engine, group: str) -> set[str]:
    async with engine.connection() as conn:
        cursor = await conn.execute(
            "SELECT id::text AS id FROM approval_requests"
            " WHERE status = 'pending' AND %s = ANY(approvers)",
            (group,),
        )
        return {row["id"] for row in await cursor.fetchall()}


def follow(api: httpx.Client, url: str) -> tuple[list[str], int]:
    seen: list[str] = []
    pages = 0
    next_url: str | None = url
    while next_url is not None:
        response = api.get(next_url)
        assert response.status_code == 200, response.text
        seen.extend(item["id"] for item in response.json())
        link = response.links.get("next")
        next_url = link["url"] if link else None
        pages += 1
        assert pages < 2000, "the Link headers go round in a circle"
    return seen, pages


async def test_an_approver_follows_the_link_headers_to_every_request_it_may_decide(
    server: Server, engine: Engine
) -> None:
    await load_requests(engine.url, rows=ROWS, runs=120)
    secret = await person_token(engine, "ann", TEAM)
    expected = await decidable_by(engine, TEAM)
    assert 0 < len(expected) < ROWS / 5
    with httpx.Client(
        base_url=server.url, headers={"authorization": f"Bearer {secret}"}, timeout=60
    ) as api:
        seen, pages = follow(api, "/api/v1/pending?limit=9&scope=decide")
        assert len(seen) == len(set(seen)) == len(expected)
        assert set(seen) == expected
        assert pages > 3
        first = api.get("/api/v1/pending?limit=9&scope=decide")
        assert re.fullmatch(
            r'</api/v1/pending\?limit=9&scope=decide&cursor=[A-Za-z0-9_-]+>; rel="next"',
            first.headers["link"],
        )
        items = first.json()
        assert [i["expires_at"] for i in items] == sorted(i["expires_at"] for i in items)
        assert all(i["may_decide"] for i in items)
        counts = api.get("/api/v1/pending/counts").json()
        assert counts["groups"][TEAM] == len(expected)
        assert counts["total"] == len(expected)


async def test_the_operator_pages_through_everything_with_filters(
    server: Server, engine: Engine
) -> None:
    await load_requests(engine.url, rows=ROWS, runs=120)
    secret = await person_token(engine, "opal", "operators")
    with httpx.Client(
        base_url=server.url, headers={"authorization": f"Bearer {secret}"}, timeout=60
    ) as api:
        seen, _ = follow(api, "/api/v1/pending?limit=500")
        assert len(set(seen)) == len(seen) == ROWS
        tools, _ = follow(api, "/api/v1/pending?limit=50&tool=send_email&order=newest")
        listed = [api.get(f"/api/v1/pending/{i}").json() for i in tools[:5]]
        assert all(item["tool"] == "send_email" for item in listed)
        assert len(tools) == ROWS // 5
        counts = api.get("/api/v1/pending/counts").json()
        assert counts["total"] == ROWS
        assert sum(counts["groups"].values()) >= ROWS


async def test_a_forged_cursor_or_a_bad_query_is_a_422_never_a_500(
    server: Server, engine: Engine
) -> None:
    await load_requests(engine.url, rows=200, runs=20)
    secret = await person_token(engine, "opal", "operators")
    with httpx.Client(
        base_url=server.url, headers={"authorization": f"Bearer {secret}"}, timeout=60
    ) as api:
        first = api.get("/api/v1/pending?limit=5")
        cursor = first.links["next"]["url"].rpartition("cursor=")[2]
        for query in (
            "cursor=garbage",
            "cursor=" + "A" * 600,
            "cursor=%00",
            "cursor=eyJ2IjoxfQ",
            f"cursor={cursor[:-2]}",
            # A cursor of another listing (another filter).
            f"cursor={cursor}&tool=send_email",
            f"cursor={cursor}&scope=decide",
            "limit=0",
            "limit=501",
            "limit=ten",
            "scope=everything",
            "order=random",
            "run=not-a-run",
            "tool=a%00b",
            "min_age=-1",
            "unknown=1",
        ):
            response = api.get(f"/api/v1/pending?{query}")
            assert response.status_code == 422, (query, response.status_code, response.text)
            assert response.json()["error"]["code"] in ("invalid_input", "invalid_request"), query
        assert api.get(f"/api/v1/pending?limit=5&cursor={cursor}").status_code == 200
        # A cursor of the listing whose first-page moment leaves no room for the age filters
        # to count back from (year 1): once an overflow, a 500.
        for ages in ("min_age=1", "max_age=172800"):
            issued = api.get(f"/api/v1/pending?limit=5&{ages}").links["next"]["url"]
            payload = json.loads(b64decode_url(issued.rpartition("cursor=")[2]))
            payload["a"] = -62135510400000000  # 0001-01-02
            forged = b64encode_url(json.dumps(payload).encode())
            response = api.get(f"/api/v1/pending?limit=5&{ages}&cursor={forged}")
            assert response.status_code == 422, (ages, response.status_code, response.text)
            assert response.json()["error"]["code"] == "invalid_input"


async def test_the_inbox_and_the_history_page_by_next_links(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    # Enough that the approver's pending and decided requests take more than a page each.
    await load_requests(engine.url, rows=3000, runs=300)
    async with engine.connection() as conn:
        await conn.execute(
            "UPDATE approval_requests SET status = 'rejected', decided_at = created_at"
            " WHERE %s = ANY(approvers) AND substr(call_id, 6)::int %% 2 = 0",
            (TEAM,),
        )
    expected = await decidable_by(engine, TEAM)
    await add_user(engine, "ann", TEAM)
    ann = sign_in("ann")
    seen: list[str] = []
    url: str | None = "/"
    pages = 0
    while url is not None:
        page = ann.get(url)
        assert page.status_code == 200, page.text
        seen.extend(re.findall(r'<a class="button" href="/requests/([0-9a-f-]{36})">', page.text))
        found = re.search(r'<a href="([^"]+)" rel="next">Next page</a>', page.text)
        url = unescape(found.group(1)) if found else None
        pages += 1
        assert pages < 100, "the next-page links go round in a circle"
    assert pages > 1
    assert len(seen) == len(set(seen))
    assert set(seen) == expected
    history: list[str] = []
    url = "/history"
    for _ in range(100):
        if url is None:
            break
        page = ann.get(url)
        assert page.status_code == 200, page.text
        history.extend(re.findall(r'<td><a href="/requests/([0-9a-f-]{36})">', page.text))
        found = re.search(r'<a href="([^"]+)" rel="next">Next page</a>', page.text)
        url = unescape(found.group(1)) if found else None
    async with engine.connection() as conn:
        cursor = await conn.execute(
            "SELECT count(*) AS n FROM approval_requests WHERE status = 'rejected'"
        )
        row = await cursor.fetchone()
    assert row is not None
    assert len(history) == len(set(history)) == row["n"]
    # Filters are GET parameters, shown back; a bad cursor or filter is a 422 page.
    filtered = ann.get("/", params={"tool": "send_email"})
    assert filtered.status_code == 200
    assert 'name="tool" value="send_email"' in filtered.text
    assert ann.get("/", params={"cursor": "garbage"}).status_code == 422
    assert ann.get("/history", params={"cursor": "garbage"}).status_code == 422
    assert ann.get("/", params={"min_age": "soon"}).status_code == 422
    assert ann.get("/", params={"run": "x"}).status_code == 422


async def test_the_runs_list_pages_by_link_headers_too(server: Server, engine: Engine) -> None:
    await load_requests(engine.url, rows=ROWS, runs=300)
    secret = await person_token(engine, "ann", TEAM)
    async with engine.connection() as conn:
        cursor = await conn.execute(
            "SELECT DISTINCT run_id::text AS id FROM approval_requests WHERE %s = ANY(approvers)",
            (TEAM,),
        )
        expected = {row["id"] for row in await cursor.fetchall()}
    assert 0 < len(expected) < 300
    with httpx.Client(
        base_url=server.url, headers={"authorization": f"Bearer {secret}"}, timeout=60
    ) as api:
        seen: list[str] = []
        url: str | None = "/api/v1/runs?limit=7"
        for _ in range(200):
            if url is None:
                break
            response = api.get(url)
            assert response.status_code == 200, response.text
            seen.extend(run["run_id"] for run in response.json())
            link = response.links.get("next")
            url = link["url"] if link else None
        assert len(seen) == len(set(seen))
        assert set(seen) == expected
        assert api.get("/api/v1/runs?status=waiting&graph=bench").status_code == 200
        for query in ("status=lost", "limit=0", "cursor=garbage", "graph="):
            assert api.get(f"/api/v1/runs?{query}").status_code == 422, query
