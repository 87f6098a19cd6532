"""One-time e-mail links on PostgreSQL: their audit entries (``PgEmailLinks``).

A link needs no table of its own: it is single-use because it decides only while its account
has not decided its request (the decision or the vote is the record of its use). What is
recorded here is what became of each posted link, in the hash-chained audit log.
"""

from __future__ import annotations

from storage.db import Database, json

#: The audit kinds: a link that decided, and one that was refused.
USED = "email_link.used"
REFUSED = "email_link.refused"


class PgEmailLinks:
    """Audits the use of one-time e-mail links."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def record(
        self,
        request_id: str,
        *,
        principal: str,
        decision: str,
        refused: str | None = None,
    ) -> None:
        """Audit a posted link: it decided (``refused`` is ``None``), or it was refused, and
        ``refused`` says why (``reused``, ``expired``, ``account disabled``, ...)."""
        data = {"decision": decision, "via": "email"}
        if refused is not None:
            data["refused"] = refused
        await self._db.run(
            "record_email_link",
            {
                "kind": USED if refused is None else REFUSED,
                "request_id": request_id,
                "principal": principal,
                "data": json(data),
            },
        )
