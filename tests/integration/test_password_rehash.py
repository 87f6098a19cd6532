"""A local account whose password hash is from before Argon2id (scrypt) still signs in, and the
sign-in replaces its hash with an Argon2id one; a failed or refused sign-in changes nothing."""

from __future__ import annotations

import pytest

from approvals.passwords import needs_rehash, scrypt_hash
from tests.integration.helpers import scalar
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")

PASSWORD = "an old password from 2025"


async def with_scrypt_hash(engine: Engine, name: str) -> str:
    """A user as an older release stored them: their hash is scrypt (N=2^14, r=8, p=1)."""
    await engine.accounts.add_user(name, PASSWORD, ["support"])
    old = scrypt_hash(PASSWORD)
    async with engine.connection() as conn:
        await conn.execute("UPDATE users SET password_hash = %s WHERE name = %s", (old, name))
    return old


async def stored_hash(engine: Engine, name: str) -> str:
    return str(await scalar(engine, "SELECT password_hash FROM users WHERE name = %s", name))


async def test_an_scrypt_hash_signs_in_and_is_rehashed_to_argon2id(engine: Engine) -> None:
    old = await with_scrypt_hash(engine, "olive")
    signed_in = await engine.accounts.authenticate("olive", PASSWORD)
    assert signed_in is not None
    assert signed_in.groups == frozenset({"support"})
    new = await stored_hash(engine, "olive")
    assert new != old
    assert new.startswith("$argon2id$v=19$m=47104,t=1,p=1$")
    assert not needs_rehash(new)
    # The new hash is the same password's, and is kept as it is from now on.
    assert await engine.accounts.authenticate("olive", PASSWORD) is not None
    assert await stored_hash(engine, "olive") == new


async def test_a_wrong_password_or_a_disabled_account_leaves_the_old_hash(
    engine: Engine,
) -> None:
    old = await with_scrypt_hash(engine, "oscar")
    assert await engine.accounts.authenticate("oscar", PASSWORD + "!") is None
    assert await stored_hash(engine, "oscar") == old
    assert await engine.accounts.disable_user("oscar")
    assert await engine.accounts.authenticate("oscar", PASSWORD) is None
    assert await stored_hash(engine, "oscar") == old
