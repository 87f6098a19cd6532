"""Runs, the tool-execution ledger, and the example tools' side-effect table."""

from __future__ import annotations

from typing import Any

from approvals.model import ExecutionStatus, Run, RunStatus, ToolExecution
from storage.audit import PgAuditLog
from storage.db import Database, Row, json


class PgRuns:
    def __init__(self, db: Database, audit: PgAuditLog) -> None:
        self._db = db
        self._audit = audit

    async def create(
        self, *, run_id: str, thread_id: str, graph: str, started_by: str, input: Any
    ) -> Run:
        async with self._db.transaction() as conn:
            row = await self._db.one(
                "create_run",
                {
                    "id": run_id,
                    "thread_id": thread_id,
                    "graph": graph,
                    "started_by": started_by,
                    "input": json(input),
                },
                conn,
            )
            await self._audit.append(
                "run.started", run_id=run_id, principal=started_by, data={"graph": graph}, conn=conn
            )
        assert row is not None
        return Run.from_row(row)

    async def get(self, run_id: str) -> Run | None:
        row = await self._db.one("get_run", {"id": run_id})
        return Run.from_row(row) if row else None

    async def set_status(
        self, run_id: str, status: RunStatus, error: str | None = None, answer: str | None = None
    ) -> None:
        await self._db.run(
            "set_run_status",
            {"id": run_id, "status": status.value, "error": error, "answer": answer},
        )


class PgToolLedger:
    """At most one execution per (run, call); a crash mid-call is ``outcome_unknown``."""

    def __init__(self, db: Database, audit: PgAuditLog) -> None:
        self._db = db
        self._audit = audit

    async def begin(
        self, *, run_id: str, call_id: str, tool: str, key: str, args_identity: str
    ) -> tuple[bool, ToolExecution]:
        params = {
            "run_id": run_id,
            "call_id": call_id,
            "tool": tool,
            "key": key,
            "args_identity": args_identity,
        }
        async with self._db.transaction() as conn:
            row = await self._db.one("begin_execution", params, conn)
            if row is not None:
                await self._audit.append(
                    "tool.started",
                    run_id=run_id,
                    call_id=call_id,
                    data={"tool": tool, "args_identity": args_identity},
                    conn=conn,
                )
                return True, ToolExecution.from_row(row)
            existing = await self._db.one("get_execution", params, conn)
        assert existing is not None
        return False, ToolExecution.from_row(existing)

    async def finish(
        self,
        *,
        run_id: str,
        call_id: str,
        status: ExecutionStatus,
        result: Any = None,
        error: str | None = None,
    ) -> ToolExecution:
        async with self._db.transaction() as conn:
            row = await self._db.one(
                "finish_execution",
                {
                    "run_id": run_id,
                    "call_id": call_id,
                    "status": status.value,
                    "result": json(result),
                    "error": error,
                },
                conn,
            )
            if row is None:
                row = await self._db.one(
                    "get_execution", {"run_id": run_id, "call_id": call_id}, conn
                )
            else:
                await self._audit.append(
                    f"tool.{status.value}",
                    run_id=run_id,
                    call_id=call_id,
                    data={"error": error},
                    conn=conn,
                )
        assert row is not None
        return ToolExecution.from_row(row)

    async def mark_unknown(self, *, run_id: str, call_id: str) -> ToolExecution:
        async with self._db.transaction() as conn:
            row = await self._db.one("mark_unknown", {"run_id": run_id, "call_id": call_id}, conn)
            if row is None:
                row = await self._db.one(
                    "get_execution", {"run_id": run_id, "call_id": call_id}, conn
                )
            else:
                await self._audit.append(
                    "tool.outcome_unknown", run_id=run_id, call_id=call_id, conn=conn
                )
        assert row is not None
        return ToolExecution.from_row(row)

    async def for_run(self, run_id: str) -> list[ToolExecution]:
        return [
            ToolExecution.from_row(r)
            for r in await self._db.all("run_executions", {"run_id": run_id})
        ]


class PgSideEffects:
    """The example tools' ``demo_side_effects`` table (no unique constraint, on purpose)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def record(self, *, run_id: str, call_id: str, tool: str, args: dict[str, Any]) -> None:
        await self._db.run(
            "record_side_effect",
            {"run_id": run_id, "call_id": call_id, "tool": tool, "args": json(args)},
        )

    async def for_call(self, run_id: str, call_id: str) -> list[Row]:
        return await self._db.all("side_effects_for_call", {"run_id": run_id, "call_id": call_id})
