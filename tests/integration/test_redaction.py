"""Redaction end to end: a policy's ``redact`` keeps a card number and its security code out of
what approvers, notifications and the audit export show, while the content identity binds the
full arguments, a redacted argument cannot be edited, and an approved edit runs with the
original values."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from approvals.errors import EditedArgumentsInvalid, EditRefused
from approvals.identity import call_identity
from approvals.model import DecisionRecord, RequestStatus
from approvals.redaction import MARKER
from tests.integration.helpers import scalar, side_effects
from tests.integration.receivers import HttpReceiver, http_receiver, smtp_receiver
from tests.integration.redaction_graphs import ARGS, CALL_ID, CARD, CVV
from web.cli.audit import export_record
from web.engine import Engine, open_engine
from web.faces.api_models import pending_call
from web.notifier import Notifier
from web.settings import Settings, WebhookTarget

SHOWN_ARGS = {
    "card_number": MARKER,
    "amount": 42.0,
    "billing": {"name": "Ada Lovelace", "cvv": MARKER},
}


@pytest.fixture
async def cards(database_url: str, tmp_path: Path) -> AsyncIterator[Engine]:
    settings = Settings(
        database_url=database_url,
        data_dir=tmp_path,
        config_file=tmp_path / "none.toml",
        graphs={"cards": "tests.integration.redaction_graphs:build"},
    )
    async with open_engine(database_url, settings) as engine:
        yield engine


async def start(engine: Engine) -> Any:
    out = await engine.runner.start("cards", {"message": "charge it"}, principal="ann")
    assert out.status == "waiting", out
    return out


def leaks(text: str) -> bool:
    # The code standing alone: "737" also turns up inside hashes and ids, and as the fraction
    # of a time or a number ("12:05:09.737+00:00"), which failed this test now and then.
    alone = rf"(?<![0-9A-Za-z.]){CVV}(?![0-9A-Za-z])"
    return CARD in text or re.search(alone, text) is not None


async def test_the_approver_sees_markers_while_the_identity_binds_the_full_arguments(
    cards: Engine,
) -> None:
    out = await start(cards)
    request = await cards.requests.get(out.pending[0])
    assert request is not None

    assert request.shown["args"] == SHOWN_ARGS
    assert request.shown["redacted"] == ["card_number", "billing.cvv"]
    assert not leaks(json.dumps(request.to_json(), default=str))
    assert not leaks(pending_call(request, True).model_dump_json())
    # The decision is bound to what runs, not to the redacted copy.
    assert request.identity == call_identity(
        run_id=out.run_id, call_id=CALL_ID, tool="charge_card", args=ARGS
    )
    assert request.shown_intact


async def test_a_plain_approval_runs_the_full_arguments(cards: Engine) -> None:
    out = await start(cards)
    await cards.decide_as_operator(out.pending[0], "approve", principal="fay")
    assert await cards.worker.drain() == 1
    effects = await side_effects(cards, out.run_id, CALL_ID)
    assert [e["args"] for e in effects] == [ARGS]


async def test_an_edit_that_changes_a_redacted_argument_is_refused_and_the_request_stays_pending(
    cards: Engine,
) -> None:
    out = await start(cards)
    request = await cards.requests.get(out.pending[0])
    assert request is not None
    forged = {**request.shown["args"], "card_number": "5500000000000004"}

    with pytest.raises(EditedArgumentsInvalid) as refused:
        await cards.decide_as_operator(out.pending[0], "approve", principal="fay", args=forged)

    assert refused.value.errors == [
        {"path": "card_number", "message": "is redacted by the policy and cannot be edited"}
    ]
    still = await cards.requests.get(out.pending[0])
    assert still is not None
    assert still.status is RequestStatus.PENDING
    assert await scalar(cards, "select count(*) from decisions") == 0


async def test_an_edit_the_policy_denies_because_of_a_withheld_value_is_refused_at_once(
    cards: Engine,
) -> None:
    # The deny depends on the card number the approver cannot see: the engine judges the edit
    # with the withheld values put back, before anything is consumed.
    out = await start(cards)
    request = await cards.requests.get(out.pending[0])
    assert request is not None
    edited = {**request.shown["args"], "amount": 600.0}

    with pytest.raises(EditRefused) as refused:
        await cards.decide_as_operator(out.pending[0], "approve", principal="fay", args=edited)

    assert refused.value.rule == "no-big-charges-on-test-cards"
    assert not leaks(str(refused.value))
    assert await scalar(cards, "select count(*) from decisions") == 0
    assert await side_effects(cards, out.run_id, CALL_ID) == []


async def test_an_approved_edit_runs_with_the_original_redacted_values(cards: Engine) -> None:
    out = await start(cards)
    request = await cards.requests.get(out.pending[0])
    assert request is not None
    edited = {**request.shown["args"], "amount": 40.0}

    decision = await cards.decide_as_operator(
        out.pending[0], "approve", principal="fay", args=edited
    )
    assert isinstance(decision, DecisionRecord)
    assert decision.kind == "edit"
    # What the decision records (and the detail page shows as "edited arguments") is the
    # approver's view: markers, never the withheld values.
    assert not leaks(json.dumps(decision.to_json(), default=str))
    assert await cards.worker.drain() == 1

    effects = await side_effects(cards, out.run_id, CALL_ID)
    assert [e["args"] for e in effects] == [{**ARGS, "amount": 40.0}]
    done = await cards.runs.get(out.run_id)
    assert done is not None
    assert done.status == "completed"


async def test_notifications_and_the_audit_export_never_carry_a_redacted_value(
    cards: Engine, database_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        database_url=database_url,
        data_dir=tmp_path,
        config_file=tmp_path / "none.toml",
        public_url="https://approvals.example.com",
        notify_timeout_seconds=5.0,
    )
    with http_receiver() as hook, http_receiver() as slack, smtp_receiver() as (mail, port):
        notifier = Notifier.from_settings(
            cards.notifications,
            notifying(settings, hook, slack, port),
        )
        out = await start(cards)
        assert await notifier.run_once() == 3
        bodies = [r.body.decode() for r in (*hook.requests, *slack.requests)]
        bodies += [m.message.as_string() for m in mail.mail]
    assert len(bodies) == 3
    assert all("charge_card" in body for body in bodies)
    assert not any(leaks(body) for body in bodies)

    await cards.decide_as_operator(out.pending[0], "approve", principal="fay")
    assert await cards.worker.drain() == 1
    exported = [export_record(row) async for row in cards.audit.export(run_id=out.run_id)]
    kinds = {r["kind"] for r in exported}
    assert {"request.created", "request.decided"} <= kinds
    assert [r for r in exported if leaks(json.dumps(r, default=str))] == []
    # The tool did run with the card: the export is clean because it never carries arguments.
    assert [e["args"] for e in await side_effects(cards, out.run_id, CALL_ID)] == [ARGS]


def notifying(
    settings: Settings, hook: HttpReceiver, slack: HttpReceiver, smtp_port: int
) -> Settings:
    return settings.model_copy(
        update={
            "notify_webhooks": [
                WebhookTarget(url=hook.url, secret=SecretStr("a-webhook-secret-xx"), name="ops")
            ],
            "notify_slack_webhook": SecretStr(slack.url),
            "notify_smtp_host": "127.0.0.1",
            "notify_smtp_port": smtp_port,
            "notify_smtp_from": "approvals@example.com",
            "notify_smtp_to": ["desk@example.com"],
        }
    )
