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
    """``id`` is stable and unique: ``local:NAME``, ``oidc:ISSUER#SUBJECT`` or ``token:NAME``."""

    id: str
    name: str
    via: Via
    groups: frozenset[str] = field(default_factory=frozenset)

    @staticmethod
    def local(name: str, groups: frozenset[str]) -> Principal:
        return Principal(id=f"local:{name}", name=name, via=Via.PASSWORD, groups=groups)

    @staticmethod
    def oidc(issuer: str, subject: str, name: str, groups: frozenset[str]) -> Principal:
        return Principal(id=f"oidc:{issuer}#{subject}", name=name, via=Via.OIDC, groups=groups)

    @staticmethod
    def token(name: str, groups: frozenset[str]) -> Principal:
        return Principal(id=f"token:{name}", name=name, via=Via.TOKEN, groups=groups)


@dataclass(frozen=True, kw_only=True, slots=True)
class ApiToken:
    """A stored API token, without its secret (only a hash of it is kept)."""

    name: str
    groups: frozenset[str]
    created_by: str
    created_at: datetime
    revoked_at: datetime | None = None
