"""Redaction, the pure part: what an approver is shown of redacted arguments, what an edit may
change, and what an approved edit runs."""

from __future__ import annotations

from typing import Any

import pytest

from approvals.errors import EditedArgumentsInvalid
from approvals.identity import call_identity
from approvals.redaction import (
    MARKER,
    check_edit,
    edit_errors,
    keep_redacted_fields,
    policy_path,
    redact,
    redact_shown,
    redacted_paths,
    restore,
    visible_errors,
)

CARD = "4111111111111111"
ARGS: dict[str, Any] = {
    "order_id": "1001",
    "amount": 25.0,
    "card_number": CARD,
    "payment": {"cvv": "737", "holder": "Ada"},
}


def shown_for(args: dict[str, Any], spec: Any) -> dict[str, Any]:
    return redact_shown({"tool": "pay", "description": "Pay.", "args": args}, spec)


def test_redacted_values_are_replaced_by_the_marker_and_listed() -> None:
    shown = shown_for(ARGS, ["card_number", "payment.cvv"])
    assert shown["args"] == {
        "order_id": "1001",
        "amount": 25.0,
        "card_number": MARKER,
        "payment": {"cvv": MARKER, "holder": "Ada"},
    }
    assert shown["redacted"] == ["card_number", "payment.cvv"]
    assert CARD not in repr(shown)
    assert "737" not in repr(shown)
    # The caller's arguments (what runs, what the identity binds) are left whole.
    assert ARGS["card_number"] == CARD
    assert ARGS["payment"]["cvv"] == "737"


def test_the_identity_of_the_full_arguments_differs_from_that_of_the_shown_copy() -> None:
    shown = shown_for(ARGS, ["card_number"])
    full = call_identity(run_id="r", call_id="c", tool="pay", args=ARGS)
    other_card = call_identity(
        run_id="r", call_id="c", tool="pay", args={**ARGS, "card_number": "5500000000000004"}
    )
    # Two calls that differ only in a redacted value look the same to the approver, but a
    # decision is bound to one of them: the identity binds what runs, not what is shown.
    assert shown_for({**ARGS, "card_number": "5500000000000004"}, ["card_number"]) == shown
    assert full != other_card


def test_no_redact_list_or_nothing_to_redact_leaves_the_shown_copy_as_it_was() -> None:
    plain = {"tool": "pay", "args": dict(ARGS)}
    assert redact_shown(plain, None) is plain
    assert redact_shown(plain, []) is plain
    assert redact_shown(plain, ["iban", "payment.iban"]) is plain
    assert "redacted" not in redact_shown(plain, ["iban"])


def test_a_path_through_a_value_that_is_not_a_mapping_redacts_that_value() -> None:
    args = {"payment": "card 4111111111111111", "items": [{"card": CARD}]}
    shown, done = redact(args, ["payment.cvv", "items.card"])
    assert shown == {"payment": MARKER, "items": MARKER}
    assert done == ["payment", "items"]


@pytest.mark.parametrize("spec", ["card_number", [1], [""], ["a..b"], {"card_number": 1}])
def test_an_unreadable_redact_list_hides_every_argument(spec: Any) -> None:
    shown = shown_for(ARGS, spec)
    assert shown["args"] == {name: MARKER for name in ARGS}
    assert shown["redacted"] == list(ARGS)


@pytest.mark.parametrize(
    ("text", "relative"),
    [("args.card_number", "card_number"), ("args.payment.card-no_2", "payment.card-no_2")],
)
def test_policy_paths_name_keys_under_args(text: str, relative: str) -> None:
    assert policy_path(text) == relative


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("card_number", "does not name a tool argument"),
        ("result.card", "does not name a tool argument"),
        ("args.", "is not a key path"),
        ("args.payment..cvv", "is not a key path"),
        ("args.card number", "is not a key path"),
        ("args.items[0].card", "list items cannot be redacted one by one"),
    ],
)
def test_policy_paths_that_name_no_argument_key_are_refused(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        policy_path(text)


def test_an_edit_that_keeps_every_marker_passes_the_check() -> None:
    shown = shown_for(ARGS, ["card_number", "payment.cvv"])
    edited = {**shown["args"], "amount": 20.0}
    assert edit_errors(edited, shown) == []
    check_edit("req-1", edited, shown)


@pytest.mark.parametrize(
    "change",
    [
        lambda a: a.update(card_number="5500000000000004"),
        lambda a: a.pop("card_number"),
        lambda a: a["payment"].update(cvv="000"),
        lambda a: a.update(payment={"holder": "Ada"}),
    ],
)
def test_an_edit_that_changes_or_drops_a_redacted_argument_is_refused(change: Any) -> None:
    shown = shown_for(ARGS, ["card_number", "payment.cvv"])
    edited = {**shown["args"], "payment": dict(shown["args"]["payment"])}
    change(edited)
    with pytest.raises(EditedArgumentsInvalid) as caught:
        check_edit("req-1", edited, shown)
    assert caught.value.errors
    assert all("redacted by the policy" in e["message"] for e in caught.value.errors)
    assert {e["path"] for e in caught.value.errors} <= {"card_number", "payment/cvv"}


def test_restore_puts_the_original_values_back_whatever_the_edit_holds_there() -> None:
    shown = shown_for(ARGS, ["card_number", "payment.cvv"])
    edited = {**shown["args"], "amount": 20.0}
    runs = restore(edited, ARGS, redacted_paths(shown))
    assert runs == {**ARGS, "amount": 20.0}
    # Even an edit that slipped a new value past the check runs with the original one.
    forged = {**edited, "card_number": "5500000000000004", "payment": "x"}
    assert restore(forged, ARGS, redacted_paths(shown)) == {
        **ARGS,
        "amount": 20.0,
        "payment": {"cvv": "737"},
    }
    assert MARKER not in repr(runs)


def test_schema_errors_at_a_redacted_argument_are_not_the_approvers_to_fix() -> None:
    shown = shown_for(ARGS, ["card_number", "payment.cvv"])
    errors = [
        {"path": "card_number", "message": "'[redacted]' does not match '^[0-9]{16}$'"},
        {"path": "payment/cvv", "message": "'[redacted]' is too long"},
        {"path": "amount", "message": "-1 is less than the minimum of 0"},
        {"path": "", "message": "'order_id' is a required property"},
    ]
    assert visible_errors(errors, shown) == errors[2:]


def test_the_edit_form_keeps_the_marker_of_a_field_it_shows_read_only() -> None:
    shown = shown_for(ARGS, ["card_number", "payment.cvv"])
    parsed = {"order_id": "1001", "amount": 30.0, "payment": {"cvv": MARKER, "holder": "Bo"}}
    errors = [{"path": "card_number", "message": "is required"}]
    kept, left = keep_redacted_fields(parsed, errors, shown)
    assert kept == {**parsed, "card_number": MARKER}
    assert left == []
    assert edit_errors(kept, shown) == []
