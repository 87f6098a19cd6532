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


def test_jcs_follows_rfc8785() -> None:
    import hashlib

    # RFC 8785: sorted keys, no whitespace, 1.0 serialises as 1, non-ASCII kept as UTF-8.
    canonical = '{"a":1,"b":[true,null,"é"],"c":{"d":1e+21,"e":0.5}}'
    expected = "jcs-sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    assert jcs_sha256({"c": {"e": 0.5, "d": 1e21}, "b": [True, None, "é"], "a": 1.0}) == expected
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
