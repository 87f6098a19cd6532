"""The JSON API's decision bodies name the kinds of the decision table (approvals.decision_kinds):
their Literals are spelled out so that the OpenAPI document stays as it is, and a kind added to
the table fails here until the bodies name it."""

from __future__ import annotations

from typing import get_args

from approvals.decision_kinds import DECISION_TYPES, KIND_RULES, DecisionKind, Ruling
from web.faces.api_models import DecisionIn, DecisionOut


def test_a_decision_sent_names_every_verdict() -> None:
    sent = get_args(DecisionIn.model_fields["decision"].annotation)
    assert sent == tuple(Ruling)
    assert set(sent) == {rules.ruling for rules in KIND_RULES.values()}


def test_a_decision_answered_names_every_stored_kind() -> None:
    answered = get_args(DecisionOut.model_fields["decision"].annotation)
    assert answered == tuple(DecisionKind)
    assert set(answered) == set(DECISION_TYPES)
