"""In-memory ports: the execute-once ledger and the side-effect log in dictionaries, for one
process.

For tests of graphs and policies that need no database, and for benches that measure the
governance layer without database round trips. They are not durable and not shared between
processes, so they do not give the engine's guarantees: a crash forgets every execution. The
engine itself uses the PostgreSQL ports in ``storage``.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from approvals.model import ExecutionStatus, ToolExecution


class MemoryToolLedger:
    """At most one execution per (run, call), within one process and one harness run."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], ToolExecution] = {}

    async def begin(
        self, *, run_id: str, call_id: str, tool: str, key: str, args_identity: str
    ) -> tuple[bool, ToolExecution]:
        existing = self._rows.get((run_id, call_id))
        if existing is not None:
            return False, existing
        row = ToolExecution(
            run_id=run_id,
            call_id=call_id,
            tool=tool,
            idempotency_key=key,
            args_identity=args_identity,
            status=ExecutionStatus.STARTED,
            result=None,
            error=None,
            started_at=datetime.now(UTC),
            finished_at=None,
        )
        self._rows[(run_id, call_id)] = row
        return True, row

    async def finish(
        self,
        *,
        run_id: str,
        call_id: str,
        status: ExecutionStatus,
        result: Any = None,
        error: str | None = None,
    ) -> ToolExecution:
        """Close a ``started`` execution; any other row is returned unchanged (as the
        PostgreSQL ledger does: a finished outcome is never overwritten)."""
        row = self._rows[(run_id, call_id)]
        if row.status is not ExecutionStatus.STARTED:
            return row
        return await self._close(run_id, call_id, status, result, error)

    async def _close(
        self,
        run_id: str,
        call_id: str,
        status: ExecutionStatus,
        result: Any,
        error: str | None,
    ) -> ToolExecution:
        row = dataclasses.replace(
            self._rows[(run_id, call_id)],
            status=status,
            result=result,
            error=error,
            finished_at=datetime.now(UTC),
        )
        self._rows[(run_id, call_id)] = row
        return row

    async def reconcile(
        self,
        *,
        run_id: str,
        call_id: str,
        status: ExecutionStatus,
        result: Any = None,
        error: str | None = None,
    ) -> ToolExecution:
        """What an operator found about an ``outcome_unknown`` execution; any other row is
        returned unchanged (as the PostgreSQL ledger does)."""
        row = self._rows[(run_id, call_id)]
        if row.status is not ExecutionStatus.OUTCOME_UNKNOWN:
            return row
        return await self._close(run_id, call_id, status, result, error)


class MemorySideEffects:
    """Every real tool invocation, in order (the kit's tools do not write here; the port is
    part of what a graph is given)."""

    def __init__(self) -> None:
        self.effects: list[dict[str, Any]] = []

    async def record(self, *, run_id: str, call_id: str, tool: str, args: dict[str, Any]) -> None:
        self.effects.append({"run_id": run_id, "call_id": call_id, "tool": tool, "args": args})
