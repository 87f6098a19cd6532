"""Password hashing for local accounts: scrypt (memory-hard), standard library only.

A stored hash reads ``scrypt$N$r$p$SALT$KEY`` (salt and key in base64), so the cost can be
raised later without invalidating the hashes already stored. These functions are CPU-bound
(tens of milliseconds); async callers run them in a worker thread.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import secrets

from approvals.errors import InvalidAccount
from approvals.json_values import text_problem

MIN_LENGTH = 12
MAX_LENGTH = 1024

SCHEME = "scrypt"
N, R, P = 2**14, 8, 1
SALT_BYTES = 16
KEY_BYTES = 32

# Bounds on the parameters a stored hash may ask for: a hash string edited to demand a huge
# cost must fail, not hang the process or exhaust its memory.
_MAX_N, _MAX_R, _MAX_P = 2**17, 16, 4


def validate_password(password: str) -> None:
    """Raise ``InvalidAccount`` unless the password is text (no NUL, no lone surrogate: bytes
    that are not UTF-8 read from stdin) of an acceptable length."""
    problem = text_problem(password)
    if problem is not None:
        raise InvalidAccount(f"a password {problem}")
    if not MIN_LENGTH <= len(password) <= MAX_LENGTH:
        raise InvalidAccount(
            f"a password must be {MIN_LENGTH} to {MAX_LENGTH} characters long"
            f" (this one has {len(password)})"
        )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _derive(password: str, salt: bytes, n: int, r: int, p: int, length: int) -> bytes:
    # OpenSSL refuses by default above 32 MiB; allow what these parameters need, and no more.
    maxmem = 128 * r * (n + p + 2) + 1024 * 1024
    return hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=n, r=r, p=p, maxmem=maxmem, dklen=length
    )


def hash_password(password: str) -> str:
    """A new salted hash of ``password``, in the stored format."""
    salt = secrets.token_bytes(SALT_BYTES)
    key = _derive(password, salt, N, R, P, KEY_BYTES)
    return f"{SCHEME}${N}${R}${P}${_b64(salt)}${_b64(key)}"


def _parse(encoded: str) -> tuple[int, int, int, bytes, bytes] | None:
    """The parameters, salt and key of a stored hash; ``None`` when it is malformed or asks
    for parameters out of bounds."""
    parts = encoded.split("$")
    if len(parts) != 6 or parts[0] != SCHEME:
        return None
    try:
        n, r, p = (int(x) for x in parts[1:4])
        salt = base64.b64decode(parts[4], validate=True)
        key = base64.b64decode(parts[5], validate=True)
    except (ValueError, binascii.Error):
        return None
    power_of_two = n > 1 and n & (n - 1) == 0
    if not (power_of_two and n <= _MAX_N and 1 <= r <= _MAX_R and 1 <= p <= _MAX_P):
        return None
    if len(salt) < SALT_BYTES or len(key) != KEY_BYTES:
        return None
    return n, r, p, salt, key


@functools.cache
def _dummy_hash() -> str:
    return hash_password(secrets.token_urlsafe(16))


def verify_password(password: str, encoded: str | None) -> bool:
    """Whether ``password`` matches the stored hash ``encoded``.

    ``None`` (no such account) costs the same as a real check and is always ``False``, so the
    time taken does not reveal which names exist. A malformed or tampered hash is ``False``.
    """
    parsed = _parse(encoded if encoded is not None else _dummy_hash())
    if parsed is None:
        return False
    n, r, p, salt, key = parsed
    candidate = _derive(password, salt, n, r, p, len(key))
    return hmac.compare_digest(candidate, key) and encoded is not None
