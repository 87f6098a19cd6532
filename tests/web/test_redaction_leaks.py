"""A redacted value reaches no approver by a side door, over real HTTP, the API, the pages and
the CLI: not through the request that asks an operator to reconcile a call whose outcome is
unknown, nor through a tool's result that echoes it, quoted in a later request."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from approvals.model import PendingCall
from approvals.redaction import MARKER
from tests.integration.helpers import person_token
from tests.integration.inprocess import invoke
from tests.integration.redaction_graphs import CALL_ID, CARD, CVV
from tests.waiting import eventually
from tests.web.conftest import Server, SignIn
from web.engine import Engine
from web.settings import Settings

GRAPHS = {
    "cards": "tests.integration.redaction_graphs:build",
    "card-echo": "tests.integration.redaction_leak_graphs:build",
}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"graphs": GRAPHS})


@pytest.fixture
def web_settings(web_settings: Settings) -> Settings:
    return web_settings.model_copy(update={"graphs": GRAPHS})


def leaks(text: str) -> bool:
    """Whether ``text`` holds the card number, or the security code standing alone ("737"
    also turns up inside hashes and ids)."""
    return CARD in text or re.search(rf"(?<![0-9A-Za-z]){CVV}(?![0-9A-Za-z])", text) is not None


async def pending_of(engine: Engine, run_id: str, tool: str) -> PendingCall:
    """The run's pending request for ``tool``, once the served app's worker has made it."""

    async def found() -> list[PendingCall]:
        return [
            r
            for r in await engine.requests.for_run(run_id)
            if r.status == "pending" and r.tool == tool
        ]

    return (await eventually(found, what=f"a pending {tool} request for run {run_id}"))[0]


async def shown_everywhere(
    server: Server,
    engine: Engine,
    sign_in: SignIn,
    cli_env: dict[str, str],
    name: str,
    group: str,
    request: PendingCall,
) -> list[str]:
    """What ``name`` (a member of ``group``, who may decide ``request``) is shown of it: the
    API's request and its run's report, the request's page, and the CLI's listing."""
    secret = await person_token(engine, name, group)
    headers = {"authorization": f"Bearer {secret}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as api:
        one = await api.get(f"/api/v1/pending/{request.id}")
        listed = await api.get("/api/v1/pending")
        report = await api.get(f"/api/v1/runs/{request.run_id}")
    assert one.status_code == listed.status_code == report.status_code == 200
    assert request.id in listed.text
    page = sign_in(name).get(f"/requests/{request.id}")
    assert page.status_code == 200
    cli = await invoke(cli_env, "pending", "list", "--json")
    assert cli.code == 0, cli.stderr
    return [one.text, listed.text, report.text, page.text, cli.stdout]


async def test_a_reconcile_request_shows_the_calls_redacted_arguments_as_markers(
    server: Server, engine: Engine, sign_in: SignIn, cli_env: dict[str, str]
) -> None:
    out = await engine.runner.start("cards", {"message": "charge it"}, principal="local:shop")
    charge = await engine.requests.get(out.pending[0])
    assert charge is not None
    # What a crash between the ledger's "started" and "finished" leaves behind.
    await engine.ledger.begin(
        run_id=out.run_id,
        call_id=CALL_ID,
        tool="charge_card",
        key="k",
        args_identity=charge.identity,
    )
    await engine.decide_as_operator(charge.id, "approve", principal="fay")
    reconcile = await pending_of(engine, out.run_id, "@reconcile:charge_card")

    assert reconcile.shown["args"]["card_number"] == MARKER
    assert reconcile.shown["args"]["billing"]["cvv"] == MARKER
    assert reconcile.shown["args"]["amount"] == 42.0
    assert reconcile.shown["redacted"] == ["card_number", "billing.cvv"]
    for text in await shown_everywhere(
        server, engine, sign_in, cli_env, "opal", "operators", reconcile
    ):
        assert not leaks(text), text


async def test_a_tool_result_that_echoes_a_redacted_value_is_masked_in_a_later_request(
    server: Server, engine: Engine, sign_in: SignIn, cli_env: dict[str, str]
) -> None:
    out = await engine.runner.start("card-echo", {"message": "charge it"}, principal="local:shop")
    await engine.decide_as_operator(out.pending[0], "approve", principal="fay")
    answer = await pending_of(engine, out.run_id, "@output")

    # The model saw the receipt as the tool wrote it (it proposed the number itself) ...
    content = answer.shown["content"]
    assert "The tool said:" in content
    assert "charged 42.00 to card" in content
    # ... its reviewers see the answer with the card's values masked.
    assert f"card {MARKER} (cvv {MARKER})" in content
    for text in await shown_everywhere(
        server, engine, sign_in, cli_env, "rita", "reviewers", answer
    ):
        assert not leaks(text), text
    assert not leaks(json.dumps(answer.to_json(), default=str))
