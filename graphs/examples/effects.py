"""The examples' side-effect log: the port their tools write each real invocation to, and its
SQL adapter over the examples' own table (``schema.sql``).

Not part of the engine: a graph of the examples finds its log in ``GraphDeps.extras`` under
``EFFECTS`` (``side_effects(deps)``), which the host fills (``extras(log)``). The table is the
examples' too: ``schema.sql`` creates it, applied by ``approvals db upgrade`` after the engine's
migrations. The adapter runs its own statements through a ``Statements`` port the host gives
(``storage.statements.PgStatements``), so the examples reach the database only through a port.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from graphs.tool_call.deps import Extra, GraphDeps


class SideEffectLog(Protocol):
    """Where the example tools write each real invocation (so a double one is visible)."""

    async def record(
        self, *, run_id: str, call_id: str, tool: str, args: dict[str, Any]
    ) -> None: ...


class Statements(Protocol):
    """Runs one SQL statement with named parameters; the rows it returns (none for a write)."""

    async def rows(self, statement: str, params: dict[str, Any]) -> list[dict[str, Any]]: ...


#: Where the host puts the examples' side-effect log in ``GraphDeps.extras``.
EFFECTS: Extra[SideEffectLog] = Extra("examples.side_effects")


def side_effects(deps: GraphDeps) -> SideEffectLog:
    """The side-effect log the host gave the examples."""
    return deps.provided(EFFECTS)


def extras(log: SideEffectLog) -> dict[str, object]:
    """``GraphDeps.extras`` that give the examples ``log``."""
    return {EFFECTS.name: log}


RECORD = """
INSERT INTO demo_side_effects (run_id, call_id, tool, args)
VALUES (%(run_id)s, %(call_id)s, %(tool)s, %(args)s::jsonb)
"""

FOR_CALL = """
SELECT * FROM demo_side_effects WHERE run_id = %(run_id)s AND call_id = %(call_id)s ORDER BY id
"""


class SqlSideEffects:
    """The examples' ``demo_side_effects`` table (no unique constraint, on purpose)."""

    def __init__(self, statements: Statements) -> None:
        self._statements = statements

    async def record(self, *, run_id: str, call_id: str, tool: str, args: dict[str, Any]) -> None:
        await self._statements.rows(
            RECORD, {"run_id": run_id, "call_id": call_id, "tool": tool, "args": json.dumps(args)}
        )

    async def for_call(self, run_id: str, call_id: str) -> list[dict[str, Any]]:
        """The invocations recorded for one call, in order (tests and the demo read them)."""
        return await self._statements.rows(FOR_CALL, {"run_id": run_id, "call_id": call_id})
