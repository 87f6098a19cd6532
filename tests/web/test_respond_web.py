"""Over HTTP: respond through the API (``{"decision": "respond", "message": ...}``) and the
detail page's form. The answer reaches the model and the tool never runs; a request whose tool
does not offer respond, or an empty answer, is a 422 and nothing is consumed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from approvals.model import RunStatus
from tests.integration.helpers import person_token, scalar
from tests.waiting import eventually
from tests.web.conftest import Server, SignIn, add_user, csrf_of
from web.engine import Engine, open_engine
from web.settings import Settings

GRAPHS = {
    "lc_ask": "tests.integration.respond_graphs:build",
    "described": "tests.integration.middleware_graphs:described",
}
ASK = {"message": "ask may I refund order 1001?"}


@pytest.fixture
def web_settings(database_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=database_url,
        data_dir=tmp_path,
        config_file=tmp_path / "none.toml",
        secret_key="test-secret-key-" + "x" * 32,
        graphs=GRAPHS,
    )


@pytest.fixture
async def asker(database_url: str, web_settings: Settings) -> AsyncIterator[Engine]:
    async with open_engine(database_url, web_settings) as engine:
        yield engine


async def _completed(engine: Engine, run_id: str) -> str:
    async def done() -> str | None:
        run = await engine.runs.get(run_id)
        assert run is not None
        return run.answer if run.status is RunStatus.COMPLETED else None

    answer: str = await eventually(done)
    return answer


async def test_the_api_takes_an_answer_only_where_offered_and_never_an_empty_one(
    server: Server, asker: Engine
) -> None:
    out = await asker.runner.start("lc_ask", ASK, principal="local:ann")
    [request_id] = out.pending
    other = await asker.runner.start("described", {"message": "refund 1001 25"}, principal="ann")
    secret = await person_token(asker, "bob", "approvers")
    headers = {"authorization": f"Bearer {secret}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as api:
        shown = await api.get(f"/api/v1/pending/{request_id}")
        assert shown.json()["allowed_decisions"] == ["reject", "respond"]
        url = f"/api/v1/pending/{request_id}/decision"
        for body in (
            {"decision": "respond", "message": "  "},
            {"decision": "respond"},
            {"decision": "respond", "message": "x" * 2001},
            {"decision": "respond", "message": "a\u0000b"},
            {"decision": "approve"},
        ):
            refused = await api.post(url, json=body)
            assert refused.status_code == 422, (body, refused.text)
        not_offered = await api.post(
            f"/api/v1/pending/{other.pending[0]}/decision",
            json={"decision": "respond", "message": "refunded by hand"},
        )
        assert not_offered.status_code == 422, not_offered.text
        assert "cannot be answered" in not_offered.json()["error"]["message"]
        assert await scalar(asker, "select count(*) from decisions") == 0

        answered = await api.post(url, json={"decision": "respond", "message": "Yes, up to 50."})
        assert answered.status_code == 200, answered.text
        assert answered.json()["decision"] == "respond"
        again = await api.post(url, json={"decision": "respond", "message": "No."})
        assert again.status_code == 409, again.text
    assert await _completed(asker, out.run_id) == "success: Yes, up to 50."
    assert await asker.effects.for_call(out.run_id, "ask-1") == []


async def test_the_detail_page_offers_the_answer_form_and_it_answers(
    server: Server, asker: Engine, sign_in: SignIn
) -> None:
    out = await asker.runner.start("lc_ask", ASK, principal="local:ann")
    [request_id] = out.pending
    await add_user(asker, "bob", "approvers")
    browser = sign_in("bob")
    page = browser.get(f"/requests/{request_id}")
    assert 'id="respond"' in page.text
    # The tool offers respond and reject: no approve (it would run the stub), no edit.
    assert 'id="approve"' not in page.text
    assert 'id="edit"' not in page.text
    csrf = csrf_of(page.text)
    empty = browser.post(f"/requests/{request_id}/respond", data={"csrf": csrf, "message": " "})
    assert empty.status_code == 422
    assert "A response needs an answer." in empty.text
    assert await scalar(asker, "select count(*) from decisions") == 0

    sent = browser.post(
        f"/requests/{request_id}/respond", data={"csrf": csrf, "message": "Ask finance."}
    )
    assert sent.status_code == 303, sent.text
    assert await _completed(asker, out.run_id) == "success: Ask finance."
    assert await asker.effects.for_call(out.run_id, "ask-1") == []
