"""The ``Accounts`` port: a password signs its account in, a token acts for its enabled owner
with no more than the owner's groups, and a revoked token is dead."""

from __future__ import annotations

import pytest

from approvals.errors import AccountExists, InvalidAccount
from approvals.principals import Principal, Via
from tests.contracts.backends import Adapters

PASSWORD = "correct horse battery staple"
ADMIN = "local:admin"


async def test_a_password_signs_its_account_in(adapters: Adapters) -> None:
    added = await adapters.accounts.add_user("alice", PASSWORD, ["finance", "agents", "finance"])

    signed_in = await adapters.accounts.authenticate("alice", PASSWORD)

    assert added == Principal.local("alice", frozenset({"agents", "finance"}))
    assert signed_in == added
    assert await adapters.accounts.authenticate("alice", PASSWORD + "!") is None
    assert await adapters.accounts.authenticate("nobody", PASSWORD) is None
    assert await adapters.accounts.authenticate("alice", "x" * 5000) is None


async def test_account_names_are_unique_and_valid(adapters: Adapters) -> None:
    await adapters.accounts.add_user("alice", PASSWORD, ["finance"])

    with pytest.raises(AccountExists):
        await adapters.accounts.add_user("alice", PASSWORD, ["finance"])
    with pytest.raises(InvalidAccount):
        await adapters.accounts.add_user("Not A Name", PASSWORD, ["finance"])
    with pytest.raises(InvalidAccount):
        await adapters.accounts.add_user("bob", PASSWORD, [])


async def test_a_disabled_account_signs_in_no_more_and_its_tokens_die(adapters: Adapters) -> None:
    await adapters.accounts.add_user("alice", PASSWORD, ["finance"])
    secret = await adapters.accounts.create_token("alice-bot", ["finance"], ADMIN, owner="alice")

    assert await adapters.disable_user("alice")
    assert not await adapters.disable_user("alice")

    assert await adapters.accounts.authenticate("alice", PASSWORD) is None
    assert await adapters.accounts.verify_token(secret) is None
    with pytest.raises(InvalidAccount):
        await adapters.accounts.create_token("alice-bot-2", ["finance"], ADMIN, owner="alice")


async def test_a_token_acts_for_its_owner_within_the_owners_groups(adapters: Adapters) -> None:
    await adapters.accounts.add_user("alice", PASSWORD, ["finance", "agents"])

    secret = await adapters.accounts.create_token("alice-bot", ["finance"], ADMIN, owner="alice")
    principal = await adapters.accounts.verify_token(secret)

    assert principal == Principal.token("alice-bot", frozenset({"finance"}), owner="alice")
    assert principal.person == "local:alice"
    with pytest.raises(InvalidAccount):
        await adapters.accounts.create_token("too-much", ["admins"], ADMIN, owner="alice")
    with pytest.raises(InvalidAccount):
        await adapters.accounts.create_token("orphan", ["finance"], ADMIN, owner="nobody")
    with pytest.raises(AccountExists):
        await adapters.accounts.create_token("alice-bot", ["finance"], ADMIN, owner="alice")


async def test_a_service_token_acts_for_nobody(adapters: Adapters) -> None:
    secret = await adapters.accounts.create_token("ci", ["agents"], ADMIN, owner=None)

    principal = await adapters.accounts.verify_token(secret)

    assert principal is not None
    assert (principal.id, principal.via, principal.groups) == (
        "token:ci",
        Via.TOKEN,
        frozenset({"agents"}),
    )
    assert principal.person is None


async def test_a_revoked_token_is_dead_and_listed_as_revoked(adapters: Adapters) -> None:
    secret = await adapters.accounts.create_token("ci", ["agents"], ADMIN, owner=None)
    await adapters.accounts.create_token("deploy", ["agents"], ADMIN, owner=None)

    assert await adapters.accounts.revoke_token("ci")
    assert not await adapters.accounts.revoke_token("ci")
    assert not await adapters.accounts.revoke_token("never-issued")

    assert await adapters.accounts.verify_token(secret) is None
    listed = {t.name: t for t in await adapters.accounts.tokens()}
    assert set(listed) == {"ci", "deploy"}
    assert listed["ci"].revoked_at is not None
    assert listed["deploy"].revoked_at is None
    assert (listed["deploy"].created_by, listed["deploy"].owner) == (ADMIN, None)


async def test_a_string_that_is_no_token_verifies_as_nothing(adapters: Adapters) -> None:
    assert await adapters.accounts.verify_token("apv_" + "A" * 43) is None
    assert await adapters.accounts.verify_token("not a token") is None
