"""Redacted arguments in the pages, over real HTTP: the detail page and the edit form show that a
value was withheld but never the value, the form offers no input for it, and an approved edit
runs with the original value."""

from __future__ import annotations

import json
import re

import pytest

from approvals.redaction import MARKER
from tests.integration.redaction_graphs import ARGS, CALL_ID, CARD
from tests.web.conftest import Server, SignIn, add_user, csrf_of
from tests.web.test_pages import wait_for
from web.engine import Engine
from web.settings import Settings

GRAPHS = {"cards": "tests.integration.redaction_graphs:build"}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"graphs": GRAPHS})


@pytest.fixture
def web_settings(web_settings: Settings) -> Settings:
    return web_settings.model_copy(update={"graphs": GRAPHS})


async def card_request(engine: Engine) -> tuple[str, str]:
    out = await engine.runner.start("cards", {"message": "charge it"}, principal="local:shop")
    assert out.status == "waiting", out
    return out.run_id, out.pending[0]


async def test_the_detail_page_marks_redacted_arguments_and_never_carries_their_values(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "fay", "finance")
    _, request_id = await card_request(engine)
    page = sign_in("fay").get(f"/requests/{request_id}")
    assert page.status_code == 200
    assert CARD not in page.text
    assert '"737"' not in page.text
    assert 'data-redacted="card_number"' in page.text
    note = re.search(r'<p class="notice" id="redacted">(.*?)</p>', page.text, re.S)
    assert note is not None
    assert "<code>card_number</code>, <code>billing.cvv</code>" in note.group(1)
    # The edit button's form carries the arguments it may change, not the redacted one.
    assert 'name="arg.card_number"' not in page.text
    assert 'name="arg.amount"' in page.text


async def test_the_edit_form_shows_a_redacted_argument_read_only_and_the_edit_runs_with_it(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "fay", "finance")
    run_id, request_id = await card_request(engine)
    c = sign_in("fay")
    csrf = csrf_of(c.get(f"/requests/{request_id}").text)
    billing = json.dumps({"name": "Ada Lovelace", "cvv": MARKER})
    form = {"csrf": csrf, "arg.amount": "40", "arg.billing": billing}

    preview = c.post(f"/requests/{request_id}/edit", data=form)
    assert preview.status_code == 200, preview.text
    assert CARD not in preview.text
    assert 'name="arg.card_number"' not in preview.text
    assert 'id="arg-card_number" data-redacted="card_number"' in preview.text
    assert 'data-redacted="billing.cvv"' in preview.text
    assert re.search(r'<tr class="changed"><th>amount</th>', preview.text)
    assert not re.search(r'<tr class="changed"><th>card_number</th>', preview.text)

    # Changing the redacted part of a field the form does offer is refused beside the field.
    forged = {**form, "arg.billing": json.dumps({"name": "Ada Lovelace", "cvv": "000"})}
    refused = c.post(f"/requests/{request_id}/edit", data={**forged, "confirm": "1"})
    assert refused.status_code == 422
    assert "billing.cvv is redacted by the policy and cannot be edited" in refused.text

    confirmed = c.post(f"/requests/{request_id}/edit", data={**form, "confirm": "1"})
    assert confirmed.status_code == 303, confirmed.text
    await wait_for(engine, run_id, "completed")
    effects = await engine.effects.for_call(run_id, CALL_ID)
    assert [e["args"] for e in effects] == [{**ARGS, "amount": 40.0}]
    after = c.get(f"/requests/{request_id}")
    assert CARD not in after.text
