"""Retention against real PostgreSQL: a long-finished run's checkpoints and records go, in
batches under its thread's lock, while a recent, waiting or still-moving run is left whole and
the audit chain still verifies."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from psycopg import sql

from approvals.errors import RunNotFound, RunPruned
from approvals.model import RunStatus
from storage.ops import RECORD_TABLES
from tests.integration.helpers import scalar, start_refund, thread_lock
from tests.integration.inprocess import invoke
from web.engine import Engine

CHECKPOINT_TABLES = ("checkpoints", "checkpoint_writes", "checkpoint_blobs")

#: How each engine table's rows are found by run (some through their parent).
RUN_ROWS = {
    "runs": "SELECT count(*) FROM runs WHERE id = {run}",
    "approval_requests": "SELECT count(*) FROM approval_requests WHERE run_id = {run}",
    "approval_votes": "SELECT count(*) FROM approval_votes v"
    " JOIN approval_requests a ON a.id = v.request_id WHERE a.run_id = {run}",
    "decisions": "SELECT count(*) FROM decisions WHERE run_id = {run}",
    "resume_queue": "SELECT count(*) FROM resume_queue WHERE run_id = {run}",
    "tool_executions": "SELECT count(*) FROM tool_executions WHERE run_id = {run}",
    "interception_records": "SELECT count(*) FROM interception_records WHERE run_id = {run}",
    "run_events": "SELECT count(*) FROM run_events WHERE run_id = {run}",
    "run_notification_deliveries": "SELECT count(*) FROM run_notification_deliveries d"
    " JOIN run_events e ON e.id = d.event_id WHERE e.run_id = {run}",
    "notification_deliveries": "SELECT count(*) FROM notification_deliveries d"
    " JOIN approval_requests a ON a.id = d.request_id WHERE a.run_id = {run}",
    "notification_attempts": "SELECT count(*) FROM notification_attempts x"
    " JOIN notification_deliveries d ON d.id = x.delivery_id"
    " JOIN approval_requests a ON a.id = d.request_id WHERE a.run_id = {run}",
    "openai_run_states": "SELECT count(*) FROM openai_run_states WHERE run_id = {run}",
    "audit_events": "SELECT count(*) FROM audit_events WHERE run_id = {run}",
}


async def rows_of(engine: Engine, run_id: str) -> dict[str, int]:
    """Rows per table that belong to one run (the engine's, its audit events, and its
    thread's checkpoints)."""
    counts: dict[str, int] = {}
    async with engine.connection() as conn:
        for table, query in RUN_ROWS.items():
            statement = sql.SQL(query).format(run=sql.Literal(run_id))
            row = await (await conn.execute(statement)).fetchone()
            assert row is not None
            counts[table] = int(row["count"])
        for table in CHECKPOINT_TABLES:
            statement = sql.SQL(
                "SELECT count(*) FROM {} WHERE thread_id = (SELECT thread_id FROM runs"
                " WHERE id = {})"
            ).format(sql.Identifier(table), sql.Literal(run_id))
            row = await (await conn.execute(statement)).fetchone()
            assert row is not None
            counts[table] = int(row["count"])
    return counts


async def execute(engine: Engine, query: str, *params: Any) -> None:
    async with engine.connection() as conn:
        await conn.execute(query, params)


async def backdate(engine: Engine, run_id: str, days: int) -> None:
    await execute(
        engine,
        "UPDATE runs SET updated_at = now() - make_interval(days => %s) WHERE id = %s",
        days,
        run_id,
    )


async def completed_refund(engine: Engine, thread_id: str | None = None) -> str:
    """A run that paused, was approved and completed: a decision, a job, a tool execution."""
    run = await engine.runner.start(
        "refund", {"message": "refund 1001"}, principal="alice", thread_id=thread_id
    )
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    assert await engine.drain() == 1
    stored = await engine.runs.get(run.run_id)
    assert stored is not None
    assert stored.status is RunStatus.COMPLETED
    return run.run_id


async def expired_refund(engine: Engine) -> str:
    """A run whose request nobody decided: it expired, and the run ended with the refusal."""
    run = await start_refund(engine)
    await execute(
        engine,
        "UPDATE approval_requests SET expires_at = now() - interval '1 second' WHERE id = %s",
        run.pending[0],
    )
    assert await engine.drain() == 1
    assert await scalar(
        engine, "SELECT status FROM approval_requests WHERE id = %s", run.pending[0]
    ) == ("expired")
    stored = await engine.runs.get(run.run_id)
    assert stored is not None
    assert stored.status is RunStatus.COMPLETED
    return str(run.run_id)


async def add_side_rows(engine: Engine, run_id: str) -> None:
    """What the notifier, a quorum and the OpenAI host would have left of a run: a vote, a
    request notification with its attempt, a run notification, a stored state."""
    request_id = await scalar(engine, "SELECT id FROM approval_requests WHERE run_id = %s", run_id)
    await execute(
        engine,
        "INSERT INTO approval_votes (request_id, principal, person) VALUES (%s, 'carol', 'carol')",
        request_id,
    )
    delivery = await scalar(
        engine,
        "INSERT INTO notification_deliveries (request_id, channel, event, escalation_level,"
        " status, attempts, finished_at) VALUES (%s, 'ops-hook', 'waiting', 0, 'sent', 1, now())"
        " RETURNING id",
        request_id,
    )
    await execute(
        engine,
        "INSERT INTO notification_attempts (delivery_id, attempt, status, response_code)"
        " VALUES (%s, 1, 'sent', 200)",
        delivery,
    )
    event = await scalar(
        engine, "SELECT id FROM run_events WHERE run_id = %s AND kind = 'status' LIMIT 1", run_id
    )
    await execute(
        engine,
        "INSERT INTO run_notification_deliveries (event_id, channel, status, attempts,"
        " finished_at) VALUES (%s, 'ops-hook', 'sent', 1, now())",
        event,
    )
    await execute(
        engine,
        "INSERT INTO openai_run_states (run_id, agent, state, version, status)"
        " VALUES (%s, 'refund_openai', '{}', 'v1', 'completed')",
        run_id,
    )


@pytest.mark.slow
async def test_a_long_finished_runs_rows_go_and_the_audit_chain_still_verifies(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    old = await completed_refund(engine)
    await add_side_rows(engine, old)
    expired = await expired_refund(engine)
    cancelled = (await start_refund(engine)).run_id
    await engine.cancel_run(cancelled, by="ops")
    for run_id in (old, expired, cancelled):
        await backdate(engine, run_id, 40)
    recent = await completed_refund(engine)
    waiting = (await start_refund(engine)).run_id
    await backdate(engine, waiting, 40)
    # An old finished run whose thread a newer run still waits on: the thread is in use.
    shared = await completed_refund(engine, thread_id="customer-7")
    await backdate(engine, shared, 40)
    await start_refund(engine)  # another thread, to be sure nothing else is swept along
    await engine.runner.start(
        "refund", {"message": "refund 1002"}, principal="alice", thread_id="customer-7"
    )
    await execute(
        engine,
        "INSERT INTO web_sessions (id_hash, principal, name, via, groups, expires_at) VALUES"
        " ('expired', 'oidc:x#1', 'x', 'oidc', '{}', now() - interval '1 minute'),"
        " ('live', 'oidc:x#2', 'y', 'oidc', '{}', now() + interval '1 hour')",
    )

    pruned_runs = (old, expired, cancelled)
    kept_runs = (recent, waiting, shared)
    before = {run_id: await rows_of(engine, run_id) for run_id in pruned_runs + kept_runs}
    # Every table retention empties has rows of the pruned runs to begin with.
    for table in RECORD_TABLES + CHECKPOINT_TABLES:
        assert sum(before[r][table] for r in pruned_runs) > 0, table
    chain_before = await engine.audit.verify()
    assert chain_before.ok

    dry = await invoke(cli_env, "retention", "prune", "--older-than", "30d", "--dry-run", "--json")
    assert dry.code == 0, dry.stderr
    real = await invoke(cli_env, "retention", "prune", "--older-than", "30d", "--json")
    assert real.code == 0, real.stderr
    result = real.json()
    expected_records = {t: sum(before[r][t] for r in pruned_runs) for t in RECORD_TABLES}
    checkpoints = {t: sum(before[r][t] for r in pruned_runs) for t in CHECKPOINT_TABLES}
    expected = {
        "threads": 3,
        "runs": 3,
        "checkpoints": checkpoints["checkpoints"],
        "checkpoint_writes": checkpoints["checkpoint_writes"],
        "checkpoint_blobs": checkpoints["checkpoint_blobs"],
        "records": expected_records,
        "web_sessions": 1,
        "busy_threads": 0,
        "held_threads": 0,
        "checkpoints_only": False,
        "older_than": "30d",
    }
    assert {k: v for k, v in result.items() if k not in ("rows", "dry_run")} == expected
    assert result["rows"] == sum(expected_records.values()) + sum(checkpoints.values()) + 1
    # The dry run counted exactly what the prune then deleted.
    assert dry.json() == result | {"dry_run": True}

    for run_id in pruned_runs:
        after = await rows_of(engine, run_id)
        gone = {t: n for t, n in after.items() if t != "audit_events" and n}
        assert gone == {}, (run_id, gone)
        # What stays of a pruned run is its part of the decision log, whole.
        assert after["audit_events"] == before[run_id]["audit_events"]
    for run_id in kept_runs:
        assert await rows_of(engine, run_id) == before[run_id], run_id
    assert await scalar(engine, "SELECT array_agg(id_hash) FROM web_sessions") == ["live"]

    # The chain still verifies, two events longer: the prune's own for its one batch of runs,
    # with its counts, and one for the expired web session.
    chain = await engine.audit.verify()
    assert chain.ok, chain.finding
    assert chain.events == chain_before.events + 2
    verified = await invoke(cli_env, "audit", "verify")
    assert verified.code == 0, verified.stderr
    event = await scalar(
        engine,
        "SELECT data FROM audit_events WHERE kind = 'retention.pruned'"
        " AND data->>'batch' IS NOT NULL ORDER BY id DESC",
    )
    assert event["batch"] == 1
    assert event["runs"] == 3
    assert event["records"]["decisions"] == expected_records["decisions"]

    # A pruned run's report says it was pruned (not found, exit 4), not a crash; an id that
    # never was a run is plainly unknown.
    with pytest.raises(RunPruned, match="was pruned by retention"):
        await engine.report(old)
    shown = await invoke(cli_env, "runs", "show", old)
    assert shown.code == 4, shown.stderr
    assert f"run {old} was pruned by retention" in shown.stderr
    never = str(uuid.uuid4())
    with pytest.raises(RunNotFound) as unknown:
        await engine.report(never)
    assert not isinstance(unknown.value, RunPruned)
    exported = await invoke(cli_env, "audit", "export", "--run", old)
    assert exported.code == 0, exported.stderr
    assert exported.stdout.count("\n") == before[old]["audit_events"]

    # A kept run reads as before; a second prune finds nothing more.
    assert (await engine.report(recent))["status"] == "completed"
    again = await invoke(cli_env, "retention", "prune", "--older-than", "30d")
    assert again.code == 0, again.stderr
    assert again.stdout.startswith("pruned 0 thread(s) whose runs ended more than 30d ago")


async def test_a_finished_run_with_something_still_moving_keeps_its_records(
    engine: Engine,
) -> None:
    # A run that ended while a resume was still queued (a decision raced its end), and one
    # whose notification is being sent right now: their checkpoints go, their records wait.
    queued = await completed_refund(engine)
    sending = await completed_refund(engine)
    await execute(engine, "UPDATE resume_queue SET status = 'queued' WHERE run_id = %s", queued)
    await add_side_rows(engine, sending)
    await execute(
        engine,
        "UPDATE notification_deliveries SET status = 'sending',"
        " next_attempt_at = now() + interval '1 minute' WHERE request_id IN"
        " (SELECT id FROM approval_requests WHERE run_id = %s)",
        sending,
    )
    for run_id in (queued, sending):
        await backdate(engine, run_id, 10)
    before = {run_id: await rows_of(engine, run_id) for run_id in (queued, sending)}

    dry = await engine.prune(timedelta(days=7), principal="ops", dry_run=True)
    pruned = await engine.prune(timedelta(days=7), principal="ops")
    assert (pruned.threads, pruned.held, pruned.runs) == (2, 2, 0)
    assert (dry.threads, dry.held, dry.runs) == (2, 2, 0)
    for run_id in (queued, sending):
        after = await rows_of(engine, run_id)
        assert after == before[run_id] | {t: 0 for t in CHECKPOINT_TABLES}, run_id
    # Once the worker settled the job and the sender its delivery, a later pass takes them.
    await execute(engine, "UPDATE resume_queue SET status = 'done' WHERE run_id = %s", queued)
    await execute(
        engine,
        "UPDATE notification_deliveries SET status = 'sent', finished_at = now()"
        " WHERE status = 'sending'",
    )
    later = await engine.prune(timedelta(days=7), principal="ops")
    assert (later.threads, later.held, later.runs) == (2, 0, 2)
    for run_id in (queued, sending):
        assert (await rows_of(engine, run_id))["runs"] == 0


async def test_checkpoints_only_keeps_the_engines_records(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    old = await completed_refund(engine)
    await backdate(engine, old, 40)
    before = await rows_of(engine, old)
    pruned = await invoke(
        cli_env, "retention", "prune", "--older-than", "30d", "--checkpoints-only", "--json"
    )
    assert pruned.code == 0, pruned.stderr
    result = pruned.json()
    assert (result["threads"], result["runs"], result["checkpoints_only"]) == (1, 0, True)
    assert result["rows"] == sum(before[t] for t in CHECKPOINT_TABLES)
    assert sum(result["records"].values()) == 0
    after = await rows_of(engine, old)
    assert after == before | {t: 0 for t in CHECKPOINT_TABLES}
    assert (await engine.report(old))["status"] == "completed"
    text = await invoke(cli_env, "retention", "prune", "--older-than", "30d", "--checkpoints-only")
    assert text.stdout.startswith("pruned the checkpoints of 0 thread(s)")
    # Without the flag, the same thread's records go on the next pass.
    full = await engine.prune(timedelta(days=30), principal="ops")
    assert (full.threads, full.runs, full.checkpoints) == (1, 1, 0)
    bad = await invoke(cli_env, "retention", "prune", "--older-than", "a month")
    assert bad.code == 2
    assert "not an age" in bad.stderr


async def test_prune_runs_in_bounded_batches_and_leaves_busy_threads(engine: Engine) -> None:
    runs = []
    for _ in range(3):
        # Order 1003 is not paid: the refund is refused before anyone is asked; the run ends.
        run = await engine.runner.start("refund", {"message": "refund 1003"}, principal="alice")
        assert run.status is RunStatus.COMPLETED
        await backdate(engine, run.run_id, 10)
        runs.append(run)
    # A step holding one thread's lock: that thread waits for a later prune.
    async with thread_lock(engine, runs[0].thread_id):
        pruned = await engine.operations.prune(timedelta(days=7), principal="ops", batch=2)
    assert (pruned.threads, pruned.busy, pruned.runs) == (2, 1, 2)
    assert (await rows_of(engine, runs[0].run_id))["runs"] == 1
    pruned = await engine.operations.prune(timedelta(days=7), principal="ops", batch=2)
    assert (pruned.threads, pruned.busy, pruned.runs) == (1, 0, 1)
    for run in runs:
        assert await engine.runs.get(run.run_id) is None

    # A long thread is taken whole even past the runs bound; the bound splits the rest.
    long_thread = [
        (
            await engine.runner.start(
                "refund", {"message": "refund 1003"}, principal="alice", thread_id="long"
            )
        ).run_id
        for _ in range(3)
    ]
    short = (
        await engine.runner.start("refund", {"message": "refund 1003"}, principal="alice")
    ).run_id
    for run_id in [*long_thread, short]:
        await backdate(engine, run_id, 10)
    pruned = await engine.operations.prune(
        timedelta(days=7), principal="ops", batch=10, batch_runs=2
    )
    assert (pruned.threads, pruned.runs) == (2, 4)
    for run_id in [*long_thread, short]:
        assert await engine.runs.get(run_id) is None


async def test_a_prune_that_dies_between_batches_has_told_the_log_of_each_batch_it_deleted(
    engine: Engine,
) -> None:
    runs = []
    for _ in range(3):
        run = await engine.runner.start("refund", {"message": "refund 1003"}, principal="alice")
        await backdate(engine, run.run_id, 10)
        runs.append(run.run_id)
    operations = engine.operations
    original = operations._db.all
    looked = 0

    async def dies_at_the_third_batch(name: str, *args: Any, **kwargs: Any) -> Any:
        nonlocal looked
        if name == "prunable_threads":
            looked += 1
            if looked == 3:
                raise ConnectionError("the process died here")
        return await original(name, *args, **kwargs)

    operations._db.all = dies_at_the_third_batch  # type: ignore[method-assign]
    try:
        with pytest.raises(ConnectionError):
            await operations.prune(timedelta(days=7), principal="ops", batch=1)
    finally:
        operations._db.all = original  # type: ignore[method-assign]
    gone = [r for r in runs if await engine.runs.get(r) is None]
    assert len(gone) == 2
    events = await scalar(
        engine,
        "SELECT coalesce(jsonb_agg(data ORDER BY id), '[]') FROM audit_events"
        " WHERE kind = 'retention.pruned'",
    )
    assert [(e["batch"], e["runs"], e["threads"]) for e in events] == [(1, 1, 1), (2, 1, 1)]
    chain = await engine.audit.verify()
    assert chain.ok, chain.finding
