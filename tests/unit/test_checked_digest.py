"""``checked_shown_digest`` remembers digests without ever giving one value another's digest."""

from __future__ import annotations

import math
import sys
import threading
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from approvals import identity
from approvals.identity import checked_shown_digest, shown_digest

#: JSON values as a shown copy read back from jsonb holds them (finite floats, integers of
#: any size, any text PostgreSQL can store), keys included.
TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


def outcome(digest: Any, shown: dict[str, Any], call_id: str) -> str:
    """The digest, or the error it raised (an integer beyond 2^53 is refused by the core)."""
    try:
        return str(digest(run_id="run-1", call_id=call_id, tool="refund", shown=shown))
    except Exception as exc:  # the memo must raise what the digest raises
        return f"raised {type(exc).__name__}: {exc}"


def both(shown: dict[str, Any], call_id: str = "call-1") -> tuple[str, str]:
    return outcome(shown_digest, shown, call_id), outcome(checked_shown_digest, shown, call_id)


@settings(deadline=None)
@given(shown=st.dictionaries(TEXT, JSON, max_size=5))
def test_the_remembered_digest_is_the_digest(shown: dict[str, Any]) -> None:
    expected, first = both(shown)
    _, again = both(shown)  # from the memo where the value is kept
    assert first == expected
    assert again == expected


@settings(deadline=None)
@given(a=st.dictionaries(TEXT, JSON, max_size=4), b=st.dictionaries(TEXT, JSON, max_size=4))
def test_two_values_never_share_a_remembered_digest_unless_theirs_agree(
    a: dict[str, Any], b: dict[str, Any]
) -> None:
    expected_a, of_a = both(a)
    expected_b, of_b = both(b)
    assert (of_a, of_b) == (expected_a, expected_b)


def test_key_order_does_not_matter_but_every_value_does() -> None:
    base, _ = both({"args": {"order": "1001", "amount": 25}})
    assert both({"args": {"amount": 25, "order": "1001"}}) == (base, base)
    for changed in (
        {"args": {"order": "1001", "amount": 26}},
        {"args": {"order": "1001", "amount": "25"}},
        {"args": {"order": "1001", "amount": 25, "x": 1}},
        {"args": {"order": "1001"}},
        {"args": [{"order": "1001", "amount": 25}]},
    ):
        expected, checked = both(changed)
        assert checked == expected != base
    assert both({"args": {"order": "1001", "amount": 25}}, call_id="call-2")[1] != base


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_number_still_fails_after_its_null_twin_was_remembered(bad: float) -> None:
    """orjson writes NaN and the infinities as null; a key holding null is never remembered,
    so the copy with the number is digested (and refused) on its own."""
    both({"amount": None})
    both({"amount": None})
    with pytest.raises(ValueError, match="JSON compliant"):
        checked_shown_digest(run_id="run-1", call_id="call-1", tool="refund", shown={"amount": bad})


def test_text_the_database_refuses_is_digested_as_before() -> None:
    """A lone surrogate: orjson cannot write it, so it is not remembered and the digest is
    whatever ``shown_digest`` makes of it (here: the same, or the same error)."""
    shown = {"note": "lone \ud800"}
    try:
        expected: str | type[Exception] = shown_digest(
            run_id="run-1", call_id="call-1", tool="refund", shown=shown
        )
    except Exception as exc:  # whichever it raises, the memo raises it too
        with pytest.raises(type(exc)):
            checked_shown_digest(run_id="run-1", call_id="call-1", tool="refund", shown=shown)
    else:
        assert (
            checked_shown_digest(run_id="run-1", call_id="call-1", tool="refund", shown=shown)
            == expected
        )


def test_the_memo_stays_bounded() -> None:
    for i in range(identity._CHECKED_MAX + 500):
        both({"n": i})
    assert len(identity._CHECKED) <= identity._CHECKED_MAX
    big = {"blob": "x" * identity._CHECKED_MAX_BYTES}
    expected, checked = both(big)
    assert checked == expected
    assert all(len(key) <= identity._CHECKED_MAX_BYTES for key in identity._CHECKED)


def test_a_shown_copy_is_digested_once_then_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []

    def counted(**kwargs: Any) -> str:
        calls.append(kwargs)
        return shown_digest(**kwargs)

    monkeypatch.setattr(identity, "shown_digest", counted)
    shown = {"args": {"order": "1001", "amount": 25}, "description": "a refund, once"}
    first = checked_shown_digest(run_id="run-9", call_id="call-9", tool="refund", shown=shown)
    again = checked_shown_digest(run_id="run-9", call_id="call-9", tool="refund", shown=shown)
    assert first == again
    assert len(calls) == 1


def test_threads_evicting_at_once_keep_the_memo_within_its_bound() -> None:
    """Threads that each find the memo full evict one entry each; two taking the same oldest
    one must not leave the memo one larger each time (it would grow without end)."""

    def check(worker: int) -> None:
        for i in range(3000):
            shown = {"n": i, "w": worker}
            got = checked_shown_digest(run_id="run-t", call_id="c", tool="refund", shown=shown)
            assert got == shown_digest(run_id="run-t", call_id="c", tool="refund", shown=shown)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        workers = [threading.Thread(target=check, args=(w,)) for w in range(6)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        sys.setswitchinterval(interval)
    assert len(identity._CHECKED) <= identity._CHECKED_MAX


def denoted_digest(key: bytes) -> str:
    """The digest of the value a memo key stands for."""
    run_id, call_id, tool, shown = orjson.loads(key)
    return shown_digest(run_id=run_id, call_id=call_id, tool=tool, shown=shown)


def test_a_copy_changed_while_it_is_digested_leaves_no_wrong_digest_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The value changes between its key and its digest (as another thread holding the same
    dict could change it): the memo must not keep the second value's digest under the first
    one's key, where every later copy equal to the first would get it."""
    shown = {"args": {"order": "7001", "amount": 25}}
    real = identity.shown_digest

    def changing(**kwargs: Any) -> str:
        shown["args"] = {"order": "7001", "amount": 1}  # changed under the check
        return real(**kwargs)

    monkeypatch.setattr(identity, "shown_digest", changing)
    checked_shown_digest(run_id="run-1", call_id="call-7", tool="refund", shown=shown)
    monkeypatch.setattr(identity, "shown_digest", real)
    original = {"args": {"order": "7001", "amount": 25}}
    expected, checked = both(original, call_id="call-7")
    assert checked == expected
    assert all(denoted_digest(key) == digest for key, digest in identity._CHECKED.items())


def test_threads_checking_and_changing_copies_leave_every_remembered_digest_right() -> None:
    """Threads check copies (more than the memo holds, so they evict) while one thread keeps
    changing a dict the others check: every answer for an unchanging copy is its digest, and
    every key left in the memo maps to the digest of the value it stands for."""
    shared: dict[str, Any] = {"amount": 0}
    stop = threading.Event()
    wrong: list[str] = []

    def change() -> None:
        i = 0
        while not stop.is_set():
            shared["amount"] = i % 3
            i += 1

    def check(worker: int) -> None:
        for i in range(3000):
            call_id = f"call-{worker}-{i}"
            checked_shown_digest(run_id="run-t", call_id=call_id, tool="refund", shown=shared)
            fixed = {"n": i % 700, "w": worker}
            got = checked_shown_digest(run_id="run-t", call_id="c", tool="refund", shown=fixed)
            if got != shown_digest(run_id="run-t", call_id="c", tool="refund", shown=fixed):
                wrong.append(call_id)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        changer = threading.Thread(target=change)
        changer.start()
        workers = [threading.Thread(target=check, args=(w,)) for w in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        stop.set()
        changer.join()
    finally:
        sys.setswitchinterval(interval)
    assert wrong == []
    assert len(identity._CHECKED) <= identity._CHECKED_MAX
    poisoned = [key for key, digest in identity._CHECKED.items() if denoted_digest(key) != digest]
    assert poisoned == []
