"""Who is acting: a principal, as the web app's sign-in (or an API token) established it.

Identity never comes from a request body: the web app builds a ``Principal`` from the signed
session cookie or the bearer token, and the domain decides what that principal may see and do.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from datetime import datetime

from approvals.errors import InvalidValue


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


#: The kinds of principal a person acts as: a local account, an OpenID Connect sign-in, an API
#: token (which acts for its owner). The approver rules count these as people.
PERSON_KINDS = frozenset({"local", "oidc", "token"})
#: ``KIND:NAME`` as the operator console takes it: a lower-case kind, then a name of printable
#: characters (no spaces or control characters, which would make the audit log ambiguous).
_SPELLED_OUT = re.compile(r"([a-z][a-z0-9_-]{0,31}):([\x21-\x7e\u00a1-\U0010ffff]{1,255})")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class ConsoleName:
    """What the operator console's ``--as TEXT`` names.

    ``--as NAME`` is the local account ``NAME`` (``local:NAME``), so that one person is never two
    principals: a run started ``--as bob`` is bob's, and bob's web account may not approve it.
    Any other principal is spelled out as ``KIND:NAME``: ``local:NAME`` (the same account),
    ``oidc:ISSUER#SUBJECT`` (a person who signs in through OpenID Connect), or a principal that
    is no person, such as ``cli:deploy-bot`` or ``ops:carol``, which may start runs and act as an
    operator but never decides. ``token:NAME`` is refused: a token acts for its owner, so name
    the owner.
    """

    #: The principal id it stands for.
    principal: str
    #: The local account that must exist for it, or ``None``.
    account: str | None

    @property
    def is_person(self) -> bool:
        """Whether the approver rules count it as a person (and so it may ever decide)."""
        return is_person_principal(self.principal)


def is_person_principal(principal: str) -> bool:
    """Whether a stored principal id is a person's (``local:``, ``oidc:``, ``token:``); any other
    kind (``cli:``, ``ops:``, ``system:``, ``demo:``) names a service or an operator's tool."""
    kind, sep, _ = principal.partition(":")
    return bool(sep) and kind in PERSON_KINDS


def console_name(text: str) -> ConsoleName:
    """What ``--as TEXT`` names (``ConsoleName``); raises ``InvalidValue`` for text that names
    no principal. Whether the account exists is for the caller to check."""
    if not text or _SURROGATE.search(text) or any(not c.isprintable() for c in text):
        raise InvalidValue("principal", "must be printable text (an account name or KIND:NAME)")
    if ":" not in text:
        return ConsoleName(principal=f"local:{text}", account=text)
    spelled = _SPELLED_OUT.fullmatch(text)
    if spelled is None:
        raise InvalidValue(
            "principal",
            f"{text[:200]!r} is neither an account name nor KIND:NAME (e.g. local:bob,"
            " cli:deploy-bot)",
        )
    kind, name = spelled.groups()
    if kind == "local":
        return ConsoleName(principal=text, account=name)
    if kind == "token":
        raise InvalidValue(
            "principal", f"{text[:200]!r} is a token: a token acts for its owner, so name the owner"
        )
    if kind == "oidc" and not re.fullmatch(r"[^#]+#.+", name):
        raise InvalidValue("principal", f"{text[:200]!r} is not oidc:ISSUER#SUBJECT")
    return ConsoleName(principal=text, account=None)


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
