"""Attacks on retention: ages it cannot honour are refused before anything is deleted, and a
prune never takes what an approver is deciding at that moment."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import psycopg
import pytest
from psycopg.rows import dict_row

from approvals.errors import InvalidValue
from approvals.model import RunStatus
from storage.db import sql
from tests.integration.helpers import WAITS_FOR_A_LOCK, scalar, start_refund
from tests.integration.inprocess import invoke
from tests.waiting import eventually
from web.engine import Engine


async def _finished_long_ago(engine: Engine) -> str:
    # Order 1003 is not paid: the refund is refused before anyone is asked; the run ends.
    run = await engine.runner.start("refund", {"message": "refund 1003"}, principal="alice")
    assert run.status is RunStatus.COMPLETED
    async with engine.connection() as conn:
        await conn.execute(
            "UPDATE runs SET updated_at = now() - interval '400 days' WHERE id = %s",
            (run.run_id,),
        )
    return str(run.run_id)


@pytest.mark.parametrize(
    "age",
    [
        "99999999999999999999w",  # beyond what a Python timedelta holds
        "999999999d",  # a timedelta, but before the first timestamp PostgreSQL knows
        "9999999w",
        "3153600001s",  # a second past a century
        "0d",
        "-5d",
        "5 d x",
        "5d\x00",
        "\udcff",
    ],
)
async def test_an_age_retention_cannot_honour_is_exit_2_and_deletes_nothing(
    engine: Engine, cli_env: dict[str, str], age: str
) -> None:
    run_id = await _finished_long_ago(engine)
    for args in (("--older-than", age), ("--older-than", age, "--dry-run")):
        result = await invoke(cli_env, "retention", "prune", *args)
        assert result.code == 2, (age, result.code, result.stdout, result.stderr)
        assert "not an age" in result.stderr or "at most" in result.stderr, result.stderr
        assert "unexpected" not in result.stderr
    assert await engine.runs.get(run_id) is not None
    pruned = "SELECT count(*) FROM audit_events WHERE kind = 'retention.pruned'"
    assert await scalar(engine, pruned) == 0


async def test_an_unusable_configured_age_is_exit_2(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    run_id = await _finished_long_ago(engine)
    env = cli_env | {"APPROVALS_RETENTION_OLDER_THAN": "99999999999999999999w"}
    result = await invoke(env, "retention", "prune")
    assert result.code == 2, (result.code, result.stderr)
    assert "APPROVALS_RETENTION_OLDER_THAN" in result.stderr
    env = cli_env | {"APPROVALS_RETENTION_OLDER_THAN": "999999999d"}
    result = await invoke(env, "retention", "prune", "--dry-run")
    assert result.code == 2, (result.code, result.stderr)
    assert await engine.runs.get(run_id) is not None


@pytest.mark.parametrize(
    "age", [timedelta(0), timedelta(seconds=-1), timedelta(days=-30), timedelta.max]
)
async def test_the_engine_refuses_an_age_of_zero_negative_or_beyond_a_century(
    engine: Engine, age: timedelta
) -> None:
    run_id = await _finished_long_ago(engine)
    for dry_run in (False, True):
        with pytest.raises(InvalidValue, match="older_than"):
            await engine.prune(age, principal="ops", dry_run=dry_run)
    assert await engine.runs.get(run_id) is not None


async def test_the_longest_age_accepted_works(engine: Engine, cli_env: dict[str, str]) -> None:
    await _finished_long_ago(engine)
    result = await invoke(cli_env, "retention", "prune", "--older-than", "36500d", "--json")
    assert result.code == 0, result.stderr
    assert result.json()["runs"] == 0


async def test_a_prune_racing_a_decision_on_a_finished_runs_request_keeps_it_whole(
    engine: Engine, database_url: str
) -> None:
    """An approver opens a decision on a request (its row locked) of a run that looks finished
    and old to retention; the prune waits for it, and then either the decision landed and the
    run is kept (a resume queued), or nothing was decided: never a decision without its run."""
    run = await start_refund(engine)
    request_id = run.pending[0]
    # A run that ended (the worker crashed it, say) while its request is still pending, long ago.
    async with engine.connection() as conn:
        await conn.execute(
            "UPDATE runs SET status = 'failed', updated_at = now() - interval '400 days'"
            " WHERE id = %s",
            (run.run_id,),
        )
    connect = psycopg.AsyncConnection.connect
    async with await connect(database_url, row_factory=dict_row) as decider:
        locked = await (
            await decider.execute(sql("lock_request_row"), {"id": request_id})
        ).fetchone()
        assert locked is not None
        pruning = asyncio.create_task(engine.prune(timedelta(days=30), principal="ops"))

        async def pruned_or_waiting() -> bool:
            return pruning.done() or bool(await scalar(engine, WAITS_FOR_A_LOCK))

        # The prune has gone as far as it can: done, or waiting for the request's row.
        await eventually(pruned_or_waiting, what="the prune to end or wait for the row")
        decided = await (
            await decider.execute(
                sql("decide"),
                {
                    "status": "approved",
                    "request_id": request_id,
                    "kind": "approve",
                    "quorum_met": True,
                    "id": "00000000-0000-4000-8000-000000000001",
                    "principal": "local:bob",
                    "reason": None,
                    "args": None,
                    "args_identity": None,
                    "override_by": None,
                },
            )
        ).fetchone()
        assert decided is not None
        await decider.commit()
        pruned = await asyncio.wait_for(pruning, 10)
    # The pending request held the run at the prune's snapshot; the decision stands.
    assert pruned.runs == 0
    assert pruned.held == 1
    assert await engine.runs.get(run.run_id) is not None
    assert (
        await scalar(engine, "SELECT count(*) FROM decisions WHERE request_id = %s", request_id)
        == 1
    )


async def test_a_pruner_named_with_bytes_that_are_not_text_is_refused_before_deleting(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    """``--as`` is argv: bytes that are not UTF-8 reach Python as lone surrogates. The audit
    event of the prune, written last, could not store them: the runs were deleted and the
    prune left no trace in the decision log (exit 1, 'unexpected UnicodeEncodeError')."""
    run_id = await _finished_long_ago(engine)
    for who in ("\udcff", "ops\x00"):
        with pytest.raises(InvalidValue, match="principal"):
            await engine.prune(timedelta(days=30), principal=who)
    result = await invoke(cli_env, "retention", "prune", "--older-than", "30d", "--as", "\udcff")
    assert result.code == 2, (result.code, result.stderr)
    assert "unexpected" not in result.stderr
    assert await engine.runs.get(run_id) is not None
    pruned = "SELECT count(*) FROM audit_events WHERE kind = 'retention.pruned'"
    assert await scalar(engine, pruned) == 0
