"""Passwords are stored as Argon2id hashes that verify only the password they were made from;
the scrypt hashes stored before still verify, and are the ones ``needs_rehash`` names."""

from __future__ import annotations

import base64

import pytest

from approvals.accounts import new_token_secret, token_digest, validate_groups, validate_name
from approvals.errors import InvalidAccount
from approvals.passwords import (
    hash_password,
    needs_rehash,
    scrypt_hash,
    validate_password,
    verify_password,
)

PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def stored() -> str:
    return hash_password(PASSWORD)


def test_a_hash_verifies_its_password_and_no_other(stored: str) -> None:
    assert verify_password(PASSWORD, stored)
    assert not verify_password(PASSWORD + " ", stored)
    assert not verify_password("", stored)
    assert not verify_password(PASSWORD.upper(), stored)


def test_the_stored_format_names_its_parameters_and_never_holds_the_password(
    stored: str,
) -> None:
    _, scheme, version, params, salt, key = stored.split("$")
    assert (scheme, version, params) == ("argon2id", "v=19", "m=47104,t=1,p=1")
    assert len(base64.b64decode(salt + "==")) == 16
    assert len(base64.b64decode(key + "=")) == 32
    assert PASSWORD not in stored
    assert not needs_rehash(stored)


def _argon2_with(stored: str, params: str) -> str:
    parts = stored.split("$")
    parts[3] = params
    return "$".join(parts)


@pytest.mark.parametrize(
    "params",
    [
        "m=1073741824,t=1,p=1",  # a terabyte: refused before hashing
        "m=47104,t=100000,p=1",
        "m=47104,t=1,p=255",
        "m=47104,t=1",
        "m=4,t=1,p=1",
    ],
)
def test_an_argon2_hash_asking_for_too_much_is_refused_before_hashing(
    stored: str, params: str
) -> None:
    assert not verify_password(PASSWORD, _argon2_with(stored, params))


def test_an_argon2_hash_of_other_parameters_still_verifies_and_is_rehashed() -> None:
    from pwdlib.hashers.argon2 import Argon2Hasher

    older = Argon2Hasher(time_cost=2, memory_cost=19456, parallelism=1).hash(PASSWORD)
    assert verify_password(PASSWORD, older)
    assert needs_rehash(older)


def test_an_scrypt_hash_from_before_still_verifies_and_is_rehashed() -> None:
    old = scrypt_hash(PASSWORD)
    assert old.startswith("scrypt$16384$8$1$")
    assert verify_password(PASSWORD, old)
    assert not verify_password(PASSWORD + " ", old)
    assert needs_rehash(old)


def test_each_hash_gets_its_own_salt() -> None:
    first, second = hash_password(PASSWORD), hash_password(PASSWORD)
    assert first != second
    assert verify_password(PASSWORD, first)
    assert verify_password(PASSWORD, second)


def _replace(stored: str, index: int, value: str) -> str:
    parts = stored.split("$")
    parts[index] = value
    return "$".join(parts)


def _flip_first_byte(b64: str) -> str:
    raw = bytearray(base64.b64decode(b64))
    raw[0] ^= 1
    return base64.b64encode(bytes(raw)).decode()


def test_a_tampered_scrypt_hash_is_refused() -> None:
    stored = scrypt_hash(PASSWORD)
    parts = stored.split("$")
    tampered = [
        _replace(stored, 5, _flip_first_byte(parts[5])),  # the key
        _replace(stored, 4, _flip_first_byte(parts[4])),  # the salt
        _replace(stored, 1, str(2**15)),  # a different cost
        _replace(stored, 0, "bcrypt"),
        _replace(stored, 5, "not base64!"),
        _replace(stored, 1, "1000"),  # not a power of two
        _replace(stored, 1, str(2**30)),  # asks for gigabytes: refused before hashing
        _replace(stored, 2, "0"),
        _replace(stored, 5, base64.b64encode(b"short").decode()),
        stored + "$extra",
        stored.rsplit("$", 1)[0],
        "",
        PASSWORD,
    ]
    for encoded in tampered:
        assert not verify_password(PASSWORD, encoded), encoded


def test_no_stored_hash_never_verifies() -> None:
    # The unknown-user path: still hashes (against a dummy), always refuses.
    assert not verify_password(PASSWORD, None)
    assert not verify_password("", None)


@pytest.mark.parametrize(
    ("password", "ok"),
    [("x" * 11, False), ("x" * 12, True), ("x" * 1024, True), ("x" * 1025, False), ("", False)],
)
def test_passwords_are_12_to_1024_characters(password: str, ok: bool) -> None:
    if ok:
        validate_password(password)
    else:
        with pytest.raises(InvalidAccount, match="12 to 1024 characters"):
            validate_password(password)


@pytest.mark.parametrize(
    "name", ["", "Alice", "-alice", ".a", "a b", "a:b", "a/b", "é", "a" * 65, "alice\n"]
)
def test_invalid_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidAccount, match="invalid user name"):
        validate_name("user", name)


def test_valid_names_and_groups_are_accepted() -> None:
    assert validate_name("token", "ci-bot.v2_1") == "ci-bot.v2_1"
    assert validate_name("user", "a" * 64) == "a" * 64
    assert validate_groups(["finance", "team:ops", "finance"]) == ["finance", "team:ops"]


@pytest.mark.parametrize("groups", [[], ["Finance"], ["ok", ""], ["a b"], "finance"])
def test_invalid_group_lists_are_refused(groups: list[str]) -> None:
    with pytest.raises(InvalidAccount):
        validate_groups(groups)


def test_token_secrets_are_prefixed_random_and_digested() -> None:
    secret = new_token_secret()
    assert secret.startswith("apv_")
    assert secret != new_token_secret()
    digest = token_digest(secret)
    assert digest is not None
    assert len(digest) == 64
    assert secret not in digest
    for malformed in ["", "apv_", secret[:-1], secret + "x", "xyz_" + secret[4:], secret + "\n"]:
        assert token_digest(malformed) is None
