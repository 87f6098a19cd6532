"""The OpenAI host's state seal on its own: a version is the key's MAC of the whole row; any
change of any column, another key, or a plain hash is refused, and no version a stranger
writes makes the check raise."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graphs.hosts.openai.sealing import SealCheck, SealedRow, StateSeal

SECRET = "the-app-secret-that-signs-sessions-too-0123456789"
ROW = SealedRow(
    run_id="7d1c2b1e-0f4e-4c55-9a53-0c1f5f0b9a11",
    agent="refund_openai",
    state='{"current_agent":{"name":"refund_openai"}}',
    waiting=(("refund-1001", "0b8f1a4e-2f6f-4a39-8f8e-2c1d3b4a5e6f"),),
    status="waiting",
    answer=None,
    error=None,
)


def test_a_row_sealed_under_a_key_checks_intact_under_it() -> None:
    seal = StateSeal(SECRET)
    version = seal.version(ROW)
    assert version.startswith(f"hmac-sha256:{seal.key_id}:")
    assert seal.check(version, ROW) is SealCheck.INTACT
    # The same secret in another process gives the same key.
    assert StateSeal(SECRET.encode()).check(version, ROW) is SealCheck.INTACT


@pytest.mark.parametrize(
    "change",
    [
        {"run_id": "7d1c2b1e-0f4e-4c55-9a53-0c1f5f0b9a12"},
        {"agent": "refund_openai_2"},
        {"state": '{"current_agent":{"name":"refund_openai"}} '},
        {"waiting": (("refund-1002", "0b8f1a4e-2f6f-4a39-8f8e-2c1d3b4a5e6f"),)},
        {"waiting": ()},
        {"status": "completed"},
        {"answer": ""},
        {"error": "boom"},
    ],
)
def test_any_column_changed_is_altered(change: dict[str, object]) -> None:
    seal = StateSeal(SECRET)
    version = seal.version(ROW)
    assert seal.check(version, dataclasses.replace(ROW, **change)) is SealCheck.ALTERED  # type: ignore[arg-type]


def test_another_secret_and_a_plain_hash_are_refused() -> None:
    ours, theirs = StateSeal(SECRET), StateSeal(SECRET + "-rotated")
    assert ours.key_id != theirs.key_id
    assert ours.check(theirs.version(ROW), ROW) is SealCheck.OTHER_KEY
    plain = "sha256:" + hashlib.sha256(ROW.state.encode()).hexdigest()
    assert ours.check(plain, ROW) is SealCheck.UNKEYED


def test_the_key_is_derived_from_the_secret_not_the_secret_itself() -> None:
    """A MAC under the raw secret (what a session signer computes with it) is no version."""
    seal = StateSeal(SECRET)
    raw = hmac.new(SECRET.encode(), ROW.state.encode(), hashlib.sha256).hexdigest()
    assert seal.check(f"hmac-sha256:{seal.key_id}:{raw}", ROW) is SealCheck.ALTERED
    assert SECRET not in repr(seal)


def test_a_short_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="32"):
        StateSeal("too short")


@given(st.text(max_size=120))
def test_no_stored_version_makes_the_check_raise_or_pass(version: str) -> None:
    seal = StateSeal(SECRET)
    assert seal.check(version, ROW) is not SealCheck.INTACT
    assert seal.check(f"hmac-sha256:{seal.key_id}:{version}", ROW) is not SealCheck.INTACT


@given(st.text(max_size=20), st.text(max_size=20), st.text(max_size=20))
def test_fields_cannot_run_into_each_other(a: str, b: str, c: str) -> None:
    """Moving text from one column to the next (answer into error, the state's start into
    the answer) gives another version."""
    seal = StateSeal(SECRET)
    one = dataclasses.replace(ROW, answer=a, error=b + c, state=c)
    other = dataclasses.replace(ROW, answer=a + b, error=c, state=c)
    if (a, b + c) != (a + b, c):
        assert seal.version(one) != seal.version(other)
    moved = dataclasses.replace(ROW, error=None, answer=a, state=b)
    shifted = dataclasses.replace(ROW, error=None, answer=a + b[:1], state=b[1:])
    if b:
        assert seal.version(moved) != seal.version(shifted)
