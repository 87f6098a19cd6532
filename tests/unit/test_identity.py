"""Content identity binds a decision to exactly what the approver saw."""

from __future__ import annotations

import uuid

import pytest

from approvals.decisions import parse_request_id
from approvals.errors import InvalidRequestId
from approvals.identity import call_identity, idempotency_key, jcs_sha256


def test_identity_ignores_key_order_but_not_values() -> None:
    a = call_identity(run_id="r", call_id="c", tool="t", args={"x": 1, "y": [1, 2]})
    b = call_identity(run_id="r", call_id="c", tool="t", args={"y": [1, 2], "x": 1})
    assert a == b
    assert a.startswith("jcs-sha256:")
    assert a != call_identity(run_id="r", call_id="c", tool="t", args={"x": 2, "y": [1, 2]})
    assert a != call_identity(run_id="r2", call_id="c", tool="t", args={"x": 1, "y": [1, 2]})
    assert a != call_identity(run_id="r", call_id="c2", tool="t", args={"x": 1, "y": [1, 2]})


def test_jcs_matches_rfc8785_number_and_string_forms() -> None:
    # RFC 8785: 1.0 serialises as 1, strings keep their unicode.
    assert jcs_sha256({"a": 1.0}) == jcs_sha256({"a": 1})
    assert jcs_sha256({"a": "é"}) != jcs_sha256({"a": "e"})


def test_idempotency_key_is_stable_per_call() -> None:
    assert idempotency_key(run_id="r", call_id="c") == idempotency_key(run_id="r", call_id="c")
    assert idempotency_key(run_id="r", call_id="c") != idempotency_key(run_id="r", call_id="d")


def test_request_ids_are_random_uuids_only() -> None:
    good = str(uuid.uuid4())
    assert parse_request_id(good) == good
    for bad in ["", "x", str(uuid.uuid1()), good.upper(), good + " ", "{" + good + "}"]:
        with pytest.raises(InvalidRequestId):
            parse_request_id(bad)
