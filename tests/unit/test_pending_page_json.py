"""``GET /api/v1/pending`` serializes its page without a model per row (web.faces.api_models
.pending_page_json); the bytes must be those ``list[PendingCallView]`` gives, for every kind of
value a request holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import TypeAdapter

from approvals.model import PendingCall, RequestStatus
from web.faces.api_models import PendingCallView, pending_call, pending_page_json


def request(n: int, **changes: Any) -> PendingCall:
    fields: dict[str, Any] = {
        "id": f"00000000-0000-4000-8000-{n:012d}",
        "run_id": f"10000000-0000-4000-8000-{n:012d}",
        "thread_id": f"thread-{n}",
        "call_id": f"call-{n}",
        "tool": "issue_refund",
        "shown": {
            "description": "Refund money",
            "args": {"order_id": "1001", "amount": 25.0, "reason": "customer request"},
        },
        "args_schema": {"type": "object", "properties": {"amount": {"maximum": 10000}}},
        "identity": "jcs-sha256:00",
        "reason": "a refund needs support",
        "interrupt_id": None,
        "state_version": None,
        "requested_by": "local:shop",
        "status": RequestStatus.PENDING,
        "created_at": datetime(2026, 12, 1, 7, 25, 40, 123456, tzinfo=UTC),
        "expires_at": datetime(2026, 12, 2, 7, 25, 40, 123456, tzinfo=UTC),
        "decided_at": None,
        "approvers": ("support",),
    }
    return PendingCall(**(fields | changes))


def test_a_page_serializes_as_its_models_do() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    items = [
        (request(1), True),
        (request(2, reason=None, shown={}, approvers=(), quorum=3), False),
        (
            request(
                3,
                shown={
                    "description": None,
                    "args": {
                        "big": 18446744073709551616,
                        "neg": -(2**70),
                        "float": 1e16,
                        "tiny": 5e-324,
                        "zero": -0.0,
                        "text": 'é ✓ "quoted" \\ \n\t\u2028 </script> \x01',
                        "nested": [[{"a": [None, True, False, 1, 1.5]}], {}],
                        "emoji": "\U0001f600",
                    },
                    "redacted": ["card"],
                },
                created_at=datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC),
                expires_at=datetime(2026, 7, 1, 12, 0, 0, 1, tzinfo=berlin),
                allow_edit=False,
                allowed_decisions=("approve", "reject", "respond"),
            ),
            True,
        ),
        (
            request(
                4,
                status=RequestStatus.EXPIRED,
                created_at=datetime(
                    2026, 3, 1, 1, 2, 3, 400000, tzinfo=timezone(timedelta(hours=-5, minutes=-30))
                ),
                args_schema={},
            ),
            False,
        ),
    ]
    models = TypeAdapter(list[PendingCallView]).dump_json(
        [pending_call(r, may_decide) for r, may_decide in items]
    )
    assert pending_page_json(items) == models
    assert pending_page_json([]) == b"[]"
