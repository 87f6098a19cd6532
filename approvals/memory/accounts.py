"""Local accounts and API tokens in memory: the rules of ``storage/accounts.py`` (scrypt hashes,
token digests only, an owned token never holding more than its enabled owner)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

from approvals.accounts import (
    is_valid_name,
    new_token_secret,
    token_digest,
    validate_groups,
    validate_name,
)
from approvals.errors import AccountExists, InvalidAccount
from approvals.memory.store import MemoryStore, StoredToken, StoredUser, now
from approvals.passwords import (
    MAX_LENGTH,
    hash_password,
    needs_rehash,
    validate_password,
    verify_password,
)
from approvals.principals import ApiToken, Principal


class MemoryAccounts:
    """Local accounts (name, password, groups) and API tokens (name, secret, groups)."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        self._store = store if store is not None else MemoryStore()

    async def add_user(self, name: str, password: str, groups: Sequence[str]) -> Principal:
        validate_name("user", name)
        members = validate_groups(groups)
        validate_password(password)
        encoded = await asyncio.to_thread(hash_password, password)
        if name in self._store.users:
            raise AccountExists("user", name)
        self._store.users[name] = StoredUser(
            password_hash=encoded, groups=members, created_at=now()
        )
        return Principal.local(name, frozenset(members))

    async def authenticate(self, name: str, password: str) -> Principal | None:
        user = self._store.users.get(name) if is_valid_name(name) else None
        # Refusals cost what a check costs, as PgAccounts's do: an unknown name and an
        # over-long password are checked against the dummy hash.
        too_long = len(password) > MAX_LENGTH
        encoded = None if user is None or too_long else user.password_hash
        matches = await asyncio.to_thread(verify_password, password[:MAX_LENGTH], encoded)
        if user is None or encoded is None or not matches or user.disabled:
            return None
        if needs_rehash(encoded):
            fresh = await asyncio.to_thread(hash_password, password)
            self._store.users[name] = dataclasses.replace(user, password_hash=fresh)
        return Principal.local(name, frozenset(user.groups))

    async def disable_user(self, name: str) -> bool:
        """Stop an account from signing in (and its tokens from working); ``False`` when there
        is no enabled account of that name."""
        user = self._store.users.get(name)
        if user is None or user.disabled:
            return False
        user.disabled = True
        return True

    async def create_token(
        self, name: str, groups: Sequence[str], created_by: str, *, owner: str | None
    ) -> str:
        validate_name("token", name)
        members = validate_groups(groups)
        if owner is not None:
            self._check_owner(name, owner, members)
        if name in self._store.tokens:
            raise AccountExists("token", name)
        secret = new_token_secret()
        digest = token_digest(secret)
        assert digest is not None, "a fresh secret has a digest"
        self._store.tokens[name] = StoredToken(
            name=name,
            digest=digest,
            groups=members,
            created_by=created_by,
            created_at=now(),
            owner=owner,
        )
        return secret

    def _check_owner(self, name: str, owner: str, groups: list[str]) -> None:
        user = self._store.users.get(owner)
        if user is None or user.disabled:
            raise InvalidAccount(
                f"token {name!r} cannot belong to {owner[:80]!r}: there is no enabled local"
                " account of that name (approvals users add creates one)"
            )
        missing = sorted(set(groups) - set(user.groups))
        if missing:
            raise InvalidAccount(
                f"token {name!r} cannot have groups its owner {owner!r} is not in:"
                f" {', '.join(missing)}"
            )

    async def verify_token(self, secret: str) -> Principal | None:
        digest = token_digest(secret)
        if digest is None:
            return None
        token = next(
            (t for t in self._store.tokens.values() if t.digest == digest and not t.revoked_at),
            None,
        )
        if token is None:
            return None
        if token.owner is None:
            return Principal.token(token.name, frozenset(token.groups))
        user = self._store.users[token.owner]
        if user.disabled:
            return None
        held = frozenset(g for g in token.groups if g in user.groups)
        return Principal.token(token.name, held, owner=token.owner)

    async def revoke_token(self, name: str) -> bool:
        token = self._store.tokens.get(name)
        if token is None or token.revoked_at is not None:
            return False
        token.revoked_at = now()
        return True

    async def tokens(self) -> list[ApiToken]:
        return [
            ApiToken(
                name=t.name,
                groups=frozenset(t.groups),
                created_by=t.created_by,
                created_at=t.created_at,
                revoked_at=t.revoked_at,
                owner=t.owner,
            )
            for t in sorted(self._store.tokens.values(), key=lambda t: (t.created_at, t.name))
        ]
