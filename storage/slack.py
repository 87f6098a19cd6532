"""Slack on PostgreSQL: which Slack user is which local account, and the audit entries of
clicks on Slack messages' buttons (``PgSlack``).

A link is a row of ``slack_users`` (migration 0032): one Slack user is one account, one account
one Slack user. With ``APPROVALS_SLACK_OIDC_CLAIM``, an OpenID Connect sign-in whose ID token
names a Slack user links it to that principal (``slack_oidc_users``, migration 0034). A click
needs no table of its own: it decides through the engine like any decision, and what became
of it is recorded in the hash-chained audit log.
"""

from __future__ import annotations

from dataclasses import dataclass

from storage.db import Database, json

#: The audit kinds: a click that decided (or voted), one that opened a modal asking for a
#: reason or an answer, and one that was refused.
DECIDED = "slack.decided"
ASKED = "slack.asked"
REFUSED = "slack.refused"


@dataclass(frozen=True, kw_only=True, slots=True)
class SlackLink:
    """What linking a Slack user came to."""

    #: Whether the account exists.
    found: bool
    #: The other account the Slack user is already linked to (nothing was linked).
    taken: str | None
    linked: bool


class PgSlack:
    """Slack users' links to local accounts, and the audit of their clicks."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def link(self, account: str, slack_user: str, *, by: str) -> SlackLink:
        """Link ``slack_user`` to ``account`` (replacing the account's earlier link), audited
        as ``account.slack_linked`` by ``by``."""
        row = await self._db.one(
            "link_slack_user", {"account": account, "slack_user": slack_user, "by": by}
        )
        assert row is not None
        return SlackLink(found=row["found"], taken=row["taken"], linked=row["linked"])

    async def account_of(self, slack_user: str) -> str | None:
        """The local account ``slack_user`` is linked to; ``None`` when it is linked to none."""
        row = await self._db.one("slack_account", {"slack_user": slack_user})
        return None if row is None else str(row["account"])

    async def slack_user_of(self, account: str) -> str | None:
        """The Slack user ``account`` is linked to; ``None`` when it is linked to none."""
        row = await self._db.one("account_slack_user", {"account": account})
        return None if row is None else str(row["slack_user"])

    async def link_oidc(self, slack_user: str, principal: str) -> bool:
        """Link ``slack_user`` to the OpenID Connect ``principal`` (``oidc:ISSUER#SUBJECT``),
        which just signed in with a claim naming it; the principal's link to another Slack
        user goes. Whether the link is new or changed (then audited)."""
        params = {"slack_user": slack_user, "principal": principal}
        async with self._db.transaction() as conn:
            await self._db.run("unlink_slack_oidc_principal", params, conn)
            row = await self._db.one("link_slack_oidc_user", params, conn)
        return bool(row and row["changed"])

    async def oidc_principal_of(
        self, slack_user: str
    ) -> tuple[str, str, frozenset[str]] | tuple[str, None, None] | None:
        """The OpenID Connect principal ``slack_user`` is linked to, with the name and groups
        of its newest live web session (its last sign-in's); the principal with ``None``s when
        it has no live session (signed out, or its sessions were ended); ``None`` when the
        Slack user is linked to no principal."""
        row = await self._db.one("slack_oidc_principal", {"slack_user": slack_user})
        if row is None:
            return None
        if row["name"] is None:
            return str(row["principal"]), None, None
        return str(row["principal"]), str(row["name"]), frozenset(row["groups"] or ())

    async def oidc_slack_user_of(self, principal: str) -> str | None:
        """The Slack user an OpenID Connect principal is linked to; ``None`` when none."""
        row = await self._db.one("oidc_slack_user", {"principal": principal})
        return None if row is None else str(row["slack_user"])

    async def record(
        self,
        request_id: str | None,
        *,
        principal: str,
        slack_user: str,
        decision: str,
        asked: bool = False,
        refused: str | None = None,
    ) -> None:
        """Audit a click: it decided, it ``asked`` (opened a modal for a reason or an answer),
        or it was refused and ``refused`` says why (``not linked``, ``not allowed``, ...).
        ``request_id``: ``None`` when the click named no valid request id."""
        data = {"decision": decision, "via": "slack", "slack_user": slack_user}
        if refused is not None:
            data["refused"] = refused
        kind = REFUSED if refused is not None else ASKED if asked else DECIDED
        await self._db.run(
            "record_slack_click",
            {
                "kind": kind,
                "request_id": request_id,
                "principal": principal,
                "data": json(data),
            },
        )
