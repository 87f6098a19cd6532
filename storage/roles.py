"""``approvals db grant ROLE``: make a role the engine's runtime role.

Serve, workers and the CLI connect as a role that owns nothing: a table's owner can disable its
triggers and rewrite the decision log, so the owner is kept for migrations. The grant itself is
the SQL function ``approvals_grant_runtime`` (migration 0013), run on the owner's connection: it
refuses a role that owns (or belongs to the owner of) anything it would be given, revokes what
the role held on the engine's tables, and grants what the engine needs, the log INSERT and
SELECT only. New tables come with upgrades, so ``db upgrade`` runs it again for
``APPROVALS_RUNTIME_ROLE`` (docs/deployment.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg.rows import dict_row

from approvals.errors import ConfigurationError, RuntimeRoleRefused
from storage.db import sql, translated_errors


@dataclass(frozen=True, kw_only=True, slots=True)
class Grant:
    """What the runtime role holds on one object after the grant."""

    object: str
    privileges: str

    def to_json(self) -> dict[str, str]:
        return {"object": self.object, "privileges": self.privileges}


async def grant_runtime(url: str, role: str) -> list[Grant]:
    """Grant ``role`` the runtime privileges, connected at ``url`` as the tables' owner."""
    with translated_errors():
        async with await psycopg.AsyncConnection.connect(url, row_factory=dict_row) as conn:
            try:
                async with conn.transaction():
                    rows = await conn.execute(sql("grant_runtime_role"), {"role": role})
                    grants = await rows.fetchall()
            except psycopg.errors.InvalidParameterValue as exc:
                raise RuntimeRoleRefused(role, _first_line(exc)) from None
            except psycopg.errors.InsufficientPrivilege as exc:
                raise ConfigurationError(
                    f"this connection may not grant on the engine's tables ({_first_line(exc)});"
                    " run it with the owner's URL (APPROVALS_MIGRATION_DATABASE_URL)"
                ) from None
    return [Grant(object=g["object"], privileges=g["privileges"]) for g in grants]


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc) else type(exc).__name__
