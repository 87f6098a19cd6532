"""The table of decision kinds: the vocabulary and defaults derive from it, its quorum rule is
the one both adapters apply, and the database's checks (storage/sql/schema.sql, which
tests/integration/test_schema.py holds to the migrations) accept exactly its kinds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from approvals.decision_kinds import (
    DECIDED_STATUSES,
    DECISION_TYPES,
    DEFAULT_DECISIONS,
    KIND_RULES,
    DecisionKind,
    Ruling,
    check_sole_approver,
    counts_as_vote,
    offered,
    spoken,
)
from approvals.errors import InvalidDecision
from approvals.states import RequestStatus

SCHEMA = Path(__file__).resolve().parents[2] / "storage" / "sql" / "schema.sql"
REQUEST_ID = "00000000-0000-4000-8000-000000000000"


def _checked_values(constraint: str) -> list[str]:
    """The text values a CHECK constraint of the schema snapshot lists, in order."""
    line = next(
        line for line in SCHEMA.read_text().splitlines() if f"CONSTRAINT {constraint} " in line
    )
    return re.findall(r"'(\w+)'::text", line)


def test_every_kind_has_one_row_under_its_own_name() -> None:
    assert set(KIND_RULES) == set(DecisionKind)
    assert all(kind is rules.kind for kind, rules in KIND_RULES.items())


def test_the_vocabulary_is_hitls_in_its_order_and_respond_must_be_asked_for() -> None:
    assert DECISION_TYPES == ("approve", "edit", "reject", "respond")
    assert DEFAULT_DECISIONS == ("approve", "edit", "reject")


def test_each_kind_becomes_its_verdict_and_leaves_its_status() -> None:
    assert {k: (r.ruling, r.leaves) for k, r in KIND_RULES.items()} == {
        DecisionKind.APPROVE: (Ruling.APPROVE, RequestStatus.APPROVED),
        DecisionKind.EDIT: (Ruling.APPROVE, RequestStatus.APPROVED),
        DecisionKind.REJECT: (Ruling.REJECT, RequestStatus.REJECTED),
        DecisionKind.RESPOND: (Ruling.RESPOND, RequestStatus.ANSWERED),
    }
    assert {
        RequestStatus.APPROVED,
        RequestStatus.REJECTED,
        RequestStatus.ANSWERED,
    } == DECIDED_STATUSES
    assert [k for k, r in KIND_RULES.items() if r.runs_tool] == [
        DecisionKind.APPROVE,
        DecisionKind.EDIT,
    ]


def test_slack_offers_no_edit_and_an_email_link_only_approve_or_reject() -> None:
    assert [k for k, r in KIND_RULES.items() if r.in_slack] == ["approve", "reject", "respond"]
    assert [k for k, r in KIND_RULES.items() if r.in_email] == ["approve", "reject"]


def test_the_page_shows_approve_respond_reject_then_edit() -> None:
    order = sorted(KIND_RULES.values(), key=lambda r: r.form_position)
    assert [r.kind for r in order] == ["approve", "respond", "reject", "edit"]


@pytest.mark.parametrize(
    ("allow_edit", "quorum", "kinds"),
    [
        (True, 1, DECISION_TYPES),
        (False, 1, ("approve", "reject", "respond")),
        (True, 2, ("approve", "reject")),
    ],
)
def test_what_is_offered_of_every_kind(
    allow_edit: bool, quorum: int, kinds: tuple[str, ...]
) -> None:
    found = offered(DECISION_TYPES, allow_edit=allow_edit, quorum=quorum)
    assert tuple(r.kind for r in found) == kinds


def test_an_edit_or_an_answer_needs_a_sole_approver_in_words_of_its_own() -> None:
    with pytest.raises(InvalidDecision, match="needs 3 approvers, so its arguments cannot be"):
        check_sole_approver(REQUEST_ID, DecisionKind.EDIT, 3)
    with pytest.raises(InvalidDecision, match="so it cannot be answered in the tool's place"):
        counts_as_vote(REQUEST_ID, DecisionKind.RESPOND, 2)
    check_sole_approver(REQUEST_ID, DecisionKind.EDIT, 1)


def test_only_an_approval_is_a_vote_and_only_under_a_quorum() -> None:
    assert counts_as_vote(REQUEST_ID, DecisionKind.APPROVE, 2)
    assert not counts_as_vote(REQUEST_ID, DecisionKind.REJECT, 2)
    assert not counts_as_vote(REQUEST_ID, DecisionKind.APPROVE, 1)


def test_the_database_checks_exactly_the_tables_kinds_and_statuses() -> None:
    assert sorted(_checked_values("decisions_kind_check")) == sorted(DECISION_TYPES)
    allowed = _checked_values("approval_requests_allowed_decisions_check")
    assert allowed == list(DECISION_TYPES)
    statuses = _checked_values("approval_requests_status_check")
    assert set(statuses) >= DECIDED_STATUSES
    assert set(statuses) == set(RequestStatus)


def test_choices_are_spoken_as_a_sentence_lists_them() -> None:
    assert spoken(Ruling) == "approve, reject or respond"
    assert spoken(["approve"]) == "approve"
