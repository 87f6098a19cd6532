"""Masking withheld values in free text (approvals.masking): long values everywhere, short ones
only standing alone, the shortest never; numbers by the text JSON writes; arguments that
masking changed become redacted."""

from __future__ import annotations

import json

from approvals.masking import Withheld, mask_shown
from approvals.redaction import MARKER, redact_shown, restore, withheld

CARD = "4111111111111111"


def test_a_long_value_is_masked_wherever_it_occurs_also_as_json_writes_it() -> None:
    mask = Withheld([CARD, 'say "hi"\n'])
    assert mask.text(f"card {CARD}, again:{CARD}x") == f"card {MARKER}, again:{MARKER}x"
    # The model is handed a tool's result as JSON text: the value escaped inside a string.
    echoed = json.dumps({"note": 'she said: say "hi"\n'})
    assert 'say \\"hi\\"\\n' in echoed
    assert MARKER in mask.text(echoed)
    assert "hi" not in mask.text(echoed)


def test_a_three_character_value_is_masked_only_standing_alone() -> None:
    mask = Withheld(["737"])
    assert mask.text("cvv 737, code=737.") == f"cvv {MARKER}, code={MARKER}."
    assert mask.text("order 1737, id a737b, 7370") == "order 1737, id a737b, 7370"


def test_values_shorter_than_three_characters_and_booleans_are_never_masked() -> None:
    mask = Withheld(["42", 7, True, None, ""])
    assert not mask
    assert mask.text("42 items for 7 days: True") == "42 items for 7 days: True"


def test_numbers_mappings_and_lists_count_by_their_values() -> None:
    mask = Withheld([int(CARD), {"pin": "98765", "tags": ["secret-tag"]}])
    assert (
        mask.text(f"n={CARD} pin 98765 tag secret-tag") == f"n={MARKER} pin {MARKER} tag {MARKER}"
    )
    # A number that holds a withheld value is replaced whole; other numbers stay numbers.
    assert mask.value({"a": int(CARD), "b": 42.5, "c": [f"x{CARD}"]}) == {
        "a": MARKER,
        "b": 42.5,
        "c": [f"x{MARKER}"],
    }


def test_the_marker_itself_is_no_value_to_mask() -> None:
    assert not Withheld([MARKER])


def test_an_argument_that_masking_changed_is_listed_as_redacted_and_runs_with_its_value() -> None:
    args = {"card": CARD, "memo": f"charge {CARD}", "billing": {"note": f"card {CARD}"}, "n": 1}
    shown = redact_shown({"tool": "charge", "args": args}, ["card"])
    masked = mask_shown(shown, Withheld(withheld(args, ["card"])))
    assert masked["args"] == {
        "card": MARKER,
        "memo": f"charge {MARKER}",
        "billing": {"note": f"card {MARKER}"},
        "n": 1,
    }
    assert masked["redacted"] == ["card", "memo", "billing.note"]
    assert CARD not in json.dumps(masked)
    # An approved edit puts back every listed argument's original value, as for redaction.
    edited = {**masked["args"], "n": 2}
    assert restore(edited, args, masked["redacted"]) == {**args, "n": 2}


def test_text_outside_the_arguments_is_masked_and_nothing_is_listed_for_it() -> None:
    shown = {"point": "output", "content": f"Done: charged card {CARD}"}
    masked = mask_shown(shown, Withheld([CARD]))
    assert masked == {"point": "output", "content": f"Done: charged card {MARKER}"}
    assert mask_shown(shown, Withheld()) is shown


def test_a_longer_value_is_masked_before_a_shorter_one_inside_it() -> None:
    mask = Withheld(["1111", CARD])
    assert mask.text(f"card {CARD}") == f"card {MARKER}"
