"""Local accounts and API tokens on PostgreSQL (the ``Accounts`` port).

Secrets never reach the database: a password is stored as its scrypt hash, a token as the
SHA-256 digest of its secret. Each change writes its audit entry in the same statement.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from approvals.accounts import (
    UserAccount,
    is_valid_name,
    new_token_secret,
    token_digest,
    validate_groups,
    validate_name,
)
from approvals.errors import AccountExists, InvalidAccount
from approvals.passwords import (
    MAX_LENGTH,
    hash_password,
    needs_rehash,
    validate_password,
    verify_password,
)
from approvals.principals import ApiToken, Principal
from storage.db import Database


def _api_token(row: dict[str, Any]) -> ApiToken:
    return ApiToken(
        name=row["name"],
        groups=frozenset(row["groups"]),
        created_by=row["created_by"],
        created_at=row["created_at"],
        revoked_at=row["revoked_at"],
        owner=row["owner"],
    )


def _user_account(row: dict[str, Any]) -> UserAccount:
    return UserAccount(
        name=row["name"],
        groups=frozenset(row["groups"]),
        created_at=row["created_at"],
        disabled=row["disabled"],
    )


class PgAccounts:
    """Local accounts (name, password, groups) and API tokens (name, secret, groups).

    ``by`` names who made a change, for the audit log, where the caller knows it.
    """

    def __init__(self, db: Database) -> None:
        self._db = db

    async def add_user(
        self, name: str, password: str, groups: Sequence[str], *, by: str | None = None
    ) -> Principal:
        validate_name("user", name)
        members = validate_groups(groups)
        validate_password(password)
        # Argon2id takes tens of milliseconds of CPU: off the event loop.
        encoded = await asyncio.to_thread(hash_password, password)
        row = await self._db.one(
            "create_user",
            {"name": name, "password_hash": encoded, "groups": members, "by": by},
        )
        if row is None:
            raise AccountExists("user", name)
        return Principal.local(name, frozenset(row["groups"]))

    async def authenticate(self, name: str, password: str) -> Principal | None:
        row = None
        if is_valid_name(name):
            row = await self._db.one("user_credentials", {"name": name})
        # An over-long password can never be right; it is checked against the dummy hash
        # (truncated) so that refusing it costs what any other refusal costs.
        too_long = len(password) > MAX_LENGTH
        encoded = None if row is None or too_long else row["password_hash"]
        matches = await asyncio.to_thread(verify_password, password[:MAX_LENGTH], encoded)
        if row is None or encoded is None or not matches or row["disabled"]:
            return None
        if needs_rehash(encoded):
            # An older scheme or cost: replaced now that the password is known to be right.
            fresh = await asyncio.to_thread(hash_password, password)
            await self._db.run("rehash_password", {"name": name, "old": encoded, "new": fresh})
        return Principal.local(name, frozenset(row["groups"]))

    async def users(self) -> list[UserAccount]:
        """Every local account, by name."""
        return [_user_account(r) for r in await self._db.all("list_users", {})]

    async def user(self, name: str) -> UserAccount | None:
        """The local account of that name (enabled or not); ``None`` when there is none."""
        if not is_valid_name(name):
            return None
        row = await self._db.one("user_by_name", {"name": name})
        return _user_account(row) if row is not None else None

    async def disable_user(self, name: str, *, by: str | None = None) -> bool:
        """Stop an account from signing in; ``False`` when there is no enabled account of
        that name."""
        row = await self._db.one("disable_user", {"name": name, "by": by})
        return row is not None

    async def set_groups(
        self, name: str, groups: Sequence[str], *, by: str | None = None
    ) -> Principal | None:
        """Replace a local account's groups (its web sessions end: revision 0010's trigger);
        ``None`` when there is no account of that name."""
        members = validate_groups(groups)
        row = await self._db.one("set_user_groups", {"name": name, "groups": members, "by": by})
        return Principal.local(name, frozenset(row["groups"])) if row else None

    async def create_token(
        self, name: str, groups: Sequence[str], created_by: str, *, owner: str | None
    ) -> str:
        """Create an API token and return its secret (shown once, never stored).

        ``owner`` names the enabled local account the token acts for, and its groups must be
        among the owner's; ``None`` makes a service token, which may start runs but never
        decide. Raises ``InvalidAccount`` or ``AccountExists``."""
        validate_name("token", name)
        members = validate_groups(groups)
        if owner is not None:
            await self._check_owner(name, owner, members)
        secret = new_token_secret()
        row = await self._db.one(
            "create_token",
            {
                "name": name,
                "digest": token_digest(secret),
                "groups": members,
                "created_by": created_by,
                "owner": owner,
            },
        )
        if row is None:
            if owner is not None:
                # The owner may have been disabled since the check: that is the answer then.
                await self._check_owner(name, owner, members)
            raise AccountExists("token", name)
        return secret

    async def _check_owner(self, name: str, owner: str, groups: list[str]) -> None:
        """``InvalidAccount`` unless ``owner`` is an enabled local account in every one of
        ``groups`` (a token never holds more than the person it acts for)."""
        row = await self._db.one("token_owner", {"name": owner}) if is_valid_name(owner) else None
        if row is None or row["disabled"]:
            raise InvalidAccount(
                f"token {name!r} cannot belong to {owner[:80]!r}: there is no enabled local"
                " account of that name (approvals users add creates one)"
            )
        missing = sorted(set(groups) - set(row["groups"]))
        if missing:
            raise InvalidAccount(
                f"token {name!r} cannot have groups its owner {owner!r} is not in:"
                f" {', '.join(missing)}"
            )

    async def verify_token(self, secret: str) -> Principal | None:
        """The token's principal, or ``None`` (not issued, revoked, or its owner disabled).
        An owned token's groups are those it was given that its owner still has."""
        digest = token_digest(secret)
        if digest is None:
            return None
        # Looked up by digest: the comparison is on a hash of the secret, so its timing
        # tells nothing about the secret itself.
        row = await self._db.one("token_by_digest", {"digest": digest})
        if row is None:
            return None
        return Principal.token(row["name"], frozenset(row["groups"]), owner=row["owner"])

    async def revoke_token(self, name: str, *, by: str | None = None) -> bool:
        row = await self._db.one("revoke_token", {"name": name, "by": by})
        return row is not None

    async def tokens(self) -> list[ApiToken]:
        return [_api_token(r) for r in await self._db.all("list_tokens", {})]
