"""Password hashing for local accounts: Argon2id (through ``pwdlib``), and the scrypt hashes
stored before it, which still verify and are replaced on the account's next sign-in.

A new hash is Argon2id in the PHC string format (``$argon2id$v=19$m=47104,t=1,p=1$SALT$KEY``):
OWASP's first recommended setting (46 MiB, one pass, one lane), about 50 ms of one core
here, under the 0.1 s a check may cost. An older hash reads ``scrypt$N$r$p$SALT$KEY`` (salt
and key in base64). Either string names its parameters, so they can be raised later:
``needs_rehash`` says when a stored hash is not the current kind. The parameters a stored
hash may ask for are bounded, so a hash string edited to demand a huge cost fails instead of
hanging the process or exhausting its memory. These functions are CPU-bound (tens of
milliseconds); async callers run them in a worker thread.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import re
import secrets

from pwdlib.exceptions import UnknownHashError
from pwdlib.hashers.argon2 import Argon2Hasher

from approvals.errors import InvalidAccount
from approvals.json_values import text_problem

MIN_LENGTH = 12
MAX_LENGTH = 1024

#: The current scheme: Argon2id, memory in KiB, passes, lanes.
ARGON2_MEMORY, ARGON2_TIME, ARGON2_LANES = 47104, 1, 1
_ARGON2 = Argon2Hasher(time_cost=ARGON2_TIME, memory_cost=ARGON2_MEMORY, parallelism=ARGON2_LANES)
#: What a stored Argon2id hash may ask for at most (256 MiB, 8 passes, 8 lanes).
_MAX_MEMORY, _MAX_TIME, _MAX_LANES = 262144, 8, 8
_ARGON2_PARAMS = re.compile(
    r"^\$argon2id\$v=19\$m=(\d{1,9}),t=(\d{1,3}),p=(\d{1,3})\$[^$]+\$[^$]+$"
)

#: The scheme stored before Argon2id: verified, never written.
SCHEME = "scrypt"
SALT_BYTES = 16
KEY_BYTES = 32
# Bounds on the parameters a stored scrypt hash may ask for.
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
    """A new salted Argon2id hash of ``password``, in the PHC string format."""
    return _ARGON2.hash(password)


def scrypt_hash(password: str, n: int = 2**14, r: int = 8, p: int = 1) -> str:
    """A scrypt hash in the format stored before Argon2id (what older accounts hold; for tests
    and for migrating accounts from elsewhere)."""
    salt = secrets.token_bytes(SALT_BYTES)
    key = _derive(password, salt, n, r, p, KEY_BYTES)
    return f"{SCHEME}${n}${r}${p}${_b64(salt)}${_b64(key)}"


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


def _argon2_in_bounds(encoded: str) -> bool:
    found = _ARGON2_PARAMS.match(encoded)
    if found is None:
        return False
    memory, passes, lanes = (int(x) for x in found.groups())
    return 8 <= memory <= _MAX_MEMORY and 1 <= passes <= _MAX_TIME and 1 <= lanes <= _MAX_LANES


def _verify_scrypt(password: str, encoded: str) -> bool:
    parsed = _parse(encoded)
    if parsed is None:
        return False
    n, r, p, salt, key = parsed
    candidate = _derive(password, salt, n, r, p, len(key))
    return hmac.compare_digest(candidate, key)


def verify_password(password: str, encoded: str | None) -> bool:
    """Whether ``password`` matches the stored hash ``encoded`` (Argon2id, or the older
    scrypt).

    ``None`` (no such account) costs the same as a real check and is always ``False``, so the
    time taken does not reveal which names exist. A malformed or tampered hash, or one asking
    for parameters out of bounds, is ``False``.
    """
    if encoded is None:
        _ARGON2.verify(password, _dummy_hash())
        return False
    if encoded.startswith(SCHEME + "$"):
        return _verify_scrypt(password, encoded)
    if not _argon2_in_bounds(encoded):
        return False
    try:
        return bool(_ARGON2.verify(password, encoded))
    except (UnknownHashError, ValueError):
        return False


def needs_rehash(encoded: str) -> bool:
    """Whether a stored hash that just verified should be replaced by a new one: an scrypt
    hash, or an Argon2id hash with other parameters than today's."""
    if encoded.startswith(SCHEME + "$"):
        return True
    return bool(_ARGON2.check_needs_rehash(encoded))
