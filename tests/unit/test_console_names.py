"""How the operator console's ``--as TEXT`` names a principal (``approvals.principals``)."""

from __future__ import annotations

import pytest

from approvals.errors import InvalidValue
from approvals.principals import ConsoleName, console_name, is_person_principal


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("bob", ConsoleName(principal="local:bob", account="bob")),
        ("local:bob", ConsoleName(principal="local:bob", account="bob")),
        ("cli:deploy-bot", ConsoleName(principal="cli:deploy-bot", account=None)),
        ("ops:carol", ConsoleName(principal="ops:carol", account=None)),
        (
            "oidc:https://id.example#4711",
            ConsoleName(principal="oidc:https://id.example#4711", account=None),
        ),
    ],
)
def test_what_a_name_names(text: str, named: ConsoleName) -> None:
    assert console_name(text) == named


@pytest.mark.parametrize(
    ("principal", "person"),
    [
        ("local:bob", True),
        ("oidc:https://id.example#4711", True),
        ("token:ci", True),
        ("cli:deploy-bot", False),
        ("system:expiry", False),
        ("bob", False),
    ],
)
def test_which_principals_are_people(principal: str, person: bool) -> None:
    assert is_person_principal(principal) is person
    if ":" in principal and not principal.startswith("token:"):
        assert console_name(principal).is_person is person


@pytest.mark.parametrize(
    "text",
    ["", "ops\x00", "\udcff", "bob\n", "token:ci", "oidc:no-subject", "Ops:carol", "cli:", ":x"],
)
def test_text_that_names_no_principal_is_refused(text: str) -> None:
    with pytest.raises(InvalidValue, match="principal"):
        console_name(text)
