"""The ``ToolLedger`` port: one execution per (run, call), a finished outcome is never
overwritten, and an ``outcome_unknown`` one changes only by an operator's reconciliation."""

from __future__ import annotations

import asyncio

from approvals.identity import idempotency_key
from approvals.model import ExecutionStatus, ToolExecution
from tests.contracts.backends import Adapters
from tests.contracts.records import waiting_run


async def test_racing_begins_give_one_owner(adapters: Adapters) -> None:
    # Many calls, each raced by eight begins: one race on one call met PostgreSQL's window (two
    # inserts both past the conflict check) only now and then, and a second unique key (the
    # idempotency key) then raised a unique violation instead of answering "not yours".
    run = await waiting_run(adapters)
    calls = [f"call-{n}" for n in range(25)]

    async def race(call_id: str) -> list[tuple[bool, ToolExecution]]:
        return await asyncio.gather(
            *(
                adapters.ledger.begin(
                    run_id=run.run_id,
                    call_id=call_id,
                    tool="refund",
                    key=idempotency_key(run_id=run.run_id, call_id=call_id),
                    args_identity="args-a",
                )
                for _ in range(8)
            )
        )

    for call_id in calls:
        results = await race(call_id)
        assert [owned for owned, _ in results].count(True) == 1, call_id
        rows = {(row.run_id, row.call_id, row.status) for _, row in results}
        assert rows == {(run.run_id, call_id, ExecutionStatus.STARTED)}


async def test_a_reused_call_id_answers_with_the_first_arguments_execution(
    adapters: Adapters,
) -> None:
    run = await waiting_run(adapters)
    owned, first = await adapters.ledger.begin(
        run_id=run.run_id, call_id="call-1", tool="refund", key="k-1", args_identity="args-a"
    )

    again, existing = await adapters.ledger.begin(
        run_id=run.run_id, call_id="call-1", tool="refund", key="k-1", args_identity="args-b"
    )

    assert owned
    assert not again
    assert existing.args_identity == "args-a"
    assert existing.idempotency_key == first.idempotency_key == "k-1"


async def test_a_finished_outcome_is_never_overwritten(adapters: Adapters) -> None:
    run = await waiting_run(adapters)
    await adapters.ledger.begin(
        run_id=run.run_id, call_id="call-1", tool="refund", key="k-1", args_identity="args-a"
    )

    done = await adapters.ledger.finish(
        run_id=run.run_id,
        call_id="call-1",
        status=ExecutionStatus.SUCCEEDED,
        result={"refunded": 1001},
    )
    again = await adapters.ledger.finish(
        run_id=run.run_id, call_id="call-1", status=ExecutionStatus.FAILED, error="late"
    )
    owned, seen = await adapters.ledger.begin(
        run_id=run.run_id, call_id="call-1", tool="refund", key="k-1", args_identity="args-a"
    )

    assert done.status is ExecutionStatus.SUCCEEDED
    assert done.result == {"refunded": 1001}
    assert done.finished_at is not None
    assert (again.status, again.result, again.error) == (
        ExecutionStatus.SUCCEEDED,
        {"refunded": 1001},
        None,
    )
    assert not owned
    assert seen.status is ExecutionStatus.SUCCEEDED


async def test_an_unknown_outcome_stays_unknown_until_reconciled(adapters: Adapters) -> None:
    run = await waiting_run(adapters)
    await adapters.ledger.begin(
        run_id=run.run_id, call_id="call-1", tool="refund", key="k-1", args_identity="args-a"
    )
    unknown = await adapters.ledger.finish(
        run_id=run.run_id,
        call_id="call-1",
        status=ExecutionStatus.OUTCOME_UNKNOWN,
        error="worker died mid-call",
    )

    finished = await adapters.ledger.finish(
        run_id=run.run_id, call_id="call-1", status=ExecutionStatus.SUCCEEDED
    )
    reconciled = await adapters.ledger.reconcile(
        run_id=run.run_id,
        call_id="call-1",
        status=ExecutionStatus.SUCCEEDED,
        result={"found": "in the bank's log"},
    )
    again = await adapters.ledger.reconcile(
        run_id=run.run_id, call_id="call-1", status=ExecutionStatus.FAILED, error="changed mind"
    )

    assert unknown.status is ExecutionStatus.OUTCOME_UNKNOWN
    assert finished.status is ExecutionStatus.OUTCOME_UNKNOWN
    assert finished.error == "worker died mid-call"
    assert reconciled.status is ExecutionStatus.SUCCEEDED
    assert (reconciled.result, reconciled.error) == ({"found": "in the bank's log"}, None)
    assert (again.status, again.result) == (
        ExecutionStatus.SUCCEEDED,
        {"found": "in the bank's log"},
    )


async def test_reconciling_an_execution_whose_outcome_is_known_changes_nothing(
    adapters: Adapters,
) -> None:
    run = await waiting_run(adapters)
    await adapters.ledger.begin(
        run_id=run.run_id, call_id="call-1", tool="refund", key="k-1", args_identity="args-a"
    )
    started = await adapters.ledger.reconcile(
        run_id=run.run_id, call_id="call-1", status=ExecutionStatus.FAILED, error="no"
    )
    await adapters.ledger.finish(
        run_id=run.run_id, call_id="call-1", status=ExecutionStatus.FAILED, error="card declined"
    )

    failed = await adapters.ledger.reconcile(
        run_id=run.run_id, call_id="call-1", status=ExecutionStatus.SUCCEEDED
    )

    assert started.status is ExecutionStatus.STARTED
    assert (failed.status, failed.error) == (ExecutionStatus.FAILED, "card declined")
