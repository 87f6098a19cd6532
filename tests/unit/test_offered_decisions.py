"""What a request offers its approvers: its tool's allowed_decisions, less edit where edits are
forbidden, and neither edit nor respond where several approvers must agree (an answer or an
edit is one person's, not a vote)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from approvals.model import DECISION_TYPES, PendingCall, RequestStatus


def _request(**changes: object) -> PendingCall:
    now = datetime.now(UTC)
    fields: dict[str, object] = {
        "id": "00000000-0000-4000-8000-000000000000",
        "run_id": "00000000-0000-4000-8000-000000000001",
        "thread_id": "t",
        "call_id": "c",
        "tool": "ask_manager",
        "shown": {"args": {}},
        "args_schema": {},
        "identity": "i",
        "reason": None,
        "interrupt_id": None,
        "state_version": None,
        "requested_by": "alice",
        "status": RequestStatus.PENDING,
        "created_at": now,
        "expires_at": now,
        "decided_at": None,
        **changes,
    }
    return PendingCall(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "offered"),
    [
        ({}, ("approve", "edit", "reject")),
        ({"allowed_decisions": DECISION_TYPES}, DECISION_TYPES),
        ({"allowed_decisions": ("respond", "reject")}, ("reject", "respond")),
        (
            {"allowed_decisions": DECISION_TYPES, "allow_edit": False},
            ("approve", "reject", "respond"),
        ),
        ({"allowed_decisions": DECISION_TYPES, "quorum": 2}, ("approve", "reject")),
    ],
)
def test_a_request_offers_its_allowed_decisions_that_it_can_take(
    changes: dict[str, object], offered: tuple[str, ...]
) -> None:
    assert _request(**changes).offered_decisions == offered
    assert _request(**changes).to_json()["allowed_decisions"] == list(offered)
