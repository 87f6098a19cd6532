"""What makes a valid local account or API token: names, groups and token secrets.

An API token's secret is ``apv_`` followed by 32 random bytes (base64url). Only its SHA-256
digest is stored, so a copy of the database does not hand out working tokens.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from approvals.errors import InvalidAccount

NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
GROUP = re.compile(r"[a-z0-9][a-z0-9._:-]{0,63}")

TOKEN_PREFIX = "apv_"  # noqa: S105 - a prefix that makes leaked tokens recognisable
_TOKEN_BYTES = 32
_TOKEN = re.compile(r"apv_[A-Za-z0-9_-]{43}")


@dataclass(frozen=True, kw_only=True, slots=True)
class UserAccount:
    """A local account as listed (its password hash is never read back out)."""

    name: str
    groups: frozenset[str] = field(default_factory=frozenset)
    created_at: datetime
    disabled: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "groups": sorted(self.groups),
            "created_at": self.created_at.isoformat(),
            "disabled": self.disabled,
        }


def is_valid_name(name: str) -> bool:
    """Whether ``name`` may name a user or a token."""
    return NAME.fullmatch(name) is not None


def validate_name(kind: str, name: str) -> str:
    """``name`` when it may name a ``kind`` ("user" or "token"); else ``InvalidAccount``."""
    if not is_valid_name(name):
        raise InvalidAccount(
            f"invalid {kind} name {name[:80]!r}: use 1 to 64 characters of a-z, 0-9, '.', '_'"
            " or '-', starting with a letter or digit"
        )
    return name


def validate_groups(groups: Sequence[str]) -> list[str]:
    """The groups, deduplicated and sorted, when there is at least one and each is valid;
    else ``InvalidAccount``."""
    if isinstance(groups, str):
        # A bare string is a sequence of characters: almost certainly a caller's mistake.
        raise InvalidAccount("groups must be a list of group names, not a string")
    if not groups:
        raise InvalidAccount("at least one group is required")
    for group in groups:
        if not GROUP.fullmatch(group):
            raise InvalidAccount(
                f"invalid group name {group[:80]!r}: use 1 to 64 characters of a-z, 0-9, '.',"
                " '_', ':' or '-', starting with a letter or digit"
            )
    return sorted(set(groups))


def new_token_secret() -> str:
    """A fresh API token secret, to be shown once."""
    return TOKEN_PREFIX + secrets.token_urlsafe(_TOKEN_BYTES)


def token_digest(secret: str) -> str | None:
    """The stored form of a token secret (SHA-256, hex); ``None`` when the secret cannot be
    one the engine issued, so that it is never looked up."""
    if not isinstance(secret, str) or not _TOKEN.fullmatch(secret):
        return None
    return hashlib.sha256(secret.encode("ascii")).hexdigest()
