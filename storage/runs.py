"""Runs, the tool-execution ledger, and the example tools' side-effect table."""

from __future__ import annotations

from typing import Any

from approvals.model import ExecutionStatus, Run, ToolExecution
from approvals.ports import Settlement
from storage.db import Database, Row, json


def settlement_params(settlement: Settlement) -> dict[str, Any]:
    return {
        "run_id": settlement.run_id,
        "status": settlement.status.value,
        "error": settlement.error,
        "answer": settlement.answer,
        "request_ids": [request_id for request_id, _ in settlement.waiting_on],
        "interrupt_ids": [interrupt_id for _, interrupt_id in settlement.waiting_on],
    }


class PgRuns:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(
        self, *, run_id: str, thread_id: str, graph: str, started_by: str, input: Any
    ) -> Run:
        row = await self._db.one(
            "create_run",
            {
                "id": run_id,
                "thread_id": thread_id,
                "graph": graph,
                "started_by": started_by,
                "input": json(input),
            },
        )
        assert row is not None
        return Run.from_row(row)

    async def get(self, run_id: str) -> Run | None:
        row = await self._db.one("get_run", {"id": run_id})
        return Run.from_row(row) if row else None

    async def settle(self, settlement: Settlement) -> None:
        await self._db.run("settle_run", settlement_params(settlement))


class PgToolLedger:
    """At most one execution per (run, call); a crash mid-call is ``outcome_unknown``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def begin(
        self, *, run_id: str, call_id: str, tool: str, key: str, args_identity: str
    ) -> tuple[bool, ToolExecution]:
        row = await self._db.one(
            "begin_execution",
            {
                "run_id": run_id,
                "call_id": call_id,
                "tool": tool,
                "key": key,
                "args_identity": args_identity,
            },
        )
        assert row is not None
        return bool(row["owned"]), ToolExecution.from_row(row)

    async def finish(
        self,
        *,
        run_id: str,
        call_id: str,
        status: ExecutionStatus,
        result: Any = None,
        error: str | None = None,
    ) -> ToolExecution:
        row = await self._db.one(
            "finish_execution",
            {
                "run_id": run_id,
                "call_id": call_id,
                "status": status.value,
                "result": json(result),
                "error": error,
            },
        )
        assert row is not None
        return ToolExecution.from_row(row)

    async def for_run(self, run_id: str) -> list[ToolExecution]:
        rows = await self._db.all("run_executions", {"run_id": run_id})
        return [ToolExecution.from_row(r) for r in rows]


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
