"""Who is acting: a principal, as the web app's sign-in (or an API token) established it.

Identity never comes from a request body: the web app builds a ``Principal`` from the signed
session cookie or the bearer token, and the domain decides what that principal may see and do.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime


class Via(enum.StrEnum):
    """How the principal signed in."""

    PASSWORD = "password"  # a local account  # noqa: S105 - a sign-in method, not a secret
    OIDC = "oidc"  # an OpenID Connect provider
    TOKEN = "token"  # an API token (programmatic approvers)  # noqa: S105


@dataclass(frozen=True, kw_only=True, slots=True)
class Principal:
    """``id`` is stable and unique: ``local:NAME``, ``oidc:ISSUER#SUBJECT`` or ``token:NAME``.

    One person may act through several principals (her web account and each API token she
    owns): the approver rules compare ``person``, never ``id``.
    """

    id: str
    name: str
    via: Via
    groups: frozenset[str] = field(default_factory=frozenset)
    #: For a token: the principal id of the local account it belongs to (``local:NAME``), or
    #: ``None`` for a service token. Unused for other principals.
    owner: str | None = None

    @property
    def person(self) -> str | None:
        """Who acts, whichever principal they use: the owner's ``local:NAME`` for a token (``None``
        for a service token, which therefore never decides), the principal's own id otherwise.
        The database's ``approvals_person_of_v1`` is the same mapping for a stored principal id."""
        if self.via is Via.TOKEN:
            return self.owner
        return self.id

    @staticmethod
    def local(name: str, groups: frozenset[str]) -> Principal:
        return Principal(id=f"local:{name}", name=name, via=Via.PASSWORD, groups=groups)

    @staticmethod
    def oidc(issuer: str, subject: str, name: str, groups: frozenset[str]) -> Principal:
        return Principal(id=f"oidc:{issuer}#{subject}", name=name, via=Via.OIDC, groups=groups)

    @staticmethod
    def token(name: str, groups: frozenset[str], owner: str | None = None) -> Principal:
        """A token's principal; ``owner`` is the name of the local account it belongs to."""
        return Principal(
            id=f"token:{name}",
            name=name,
            via=Via.TOKEN,
            groups=groups,
            owner=f"local:{owner}" if owner is not None else None,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ApiToken:
    """A stored API token, without its secret (only a hash of it is kept)."""

    name: str
    groups: frozenset[str]
    created_by: str
    created_at: datetime
    revoked_at: datetime | None = None
    #: The local account it belongs to; ``None`` for a service token (starts runs, never decides).
    owner: str | None = None
