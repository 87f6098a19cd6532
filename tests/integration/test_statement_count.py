"""The statements one approval cycle sends to PostgreSQL, counted, so that later work cannot add
round trips without noticing (issue 37): a refund started until it pauses, decided, and resumed
by the worker until it completes, on the engine as the app builds it.

Counted on the client, as ``make bench``'s ``--count`` does (``bench.cycle_stats``): every
``execute`` of psycopg's async cursor, the one path the engine's statements and LangGraph's
saver take. Each phase has its budget, what it sends today; a phase over its budget fails the
test with the statements it sent, so the new one is easy to find. A phase under its budget
passes: lower the budget with the change that saved the statement.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from graphs.run import step_events
from tests.integration.helpers import start_refund
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")

#: Statements per phase of the refund example's approval cycle, as sent today (the refund
#: example looks the order up, is checked by its policy and preconditions, and runs the tool;
#: ``bench/approval_cycle.py --count`` counts the bench's one-call cycle agent the same way).
BUDGET = {"start": 36, "decide": 2, "resume": 23}


class Counted:
    def __init__(self) -> None:
        self.statements: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return sum(self.statements.values())


@contextmanager
def counting() -> Iterator[Counted]:
    """Every statement psycopg's async cursors send while the block runs."""
    counted = Counted()
    cursor = psycopg.AsyncCursor
    execute, executemany = cursor.execute, cursor.executemany

    async def counted_execute(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        text = query.decode() if isinstance(query, bytes) else str(query)
        counted.statements[" ".join(text.split())[:80]] += 1
        return await execute(self, query, params, **kw)

    async def counted_executemany(self: Any, query: Any, seq: Any, **kw: Any) -> Any:
        rows = list(seq)
        text = query.decode() if isinstance(query, bytes) else str(query)
        counted.statements[" ".join(text.split())[:80]] += len(rows)
        return await executemany(self, query, rows, **kw)

    cursor.execute = counted_execute  # type: ignore[method-assign]
    cursor.executemany = counted_executemany  # type: ignore[assignment,method-assign]
    try:
        yield counted
    finally:
        cursor.execute = execute  # type: ignore[method-assign]
        cursor.executemany = executemany  # type: ignore[method-assign]


async def test_one_approval_cycle_sends_no_more_statements_than_today(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A slow step (a loaded machine) writes its node updates on the way instead of with its
    # settlement: one statement more, which is timing, not a change. Never here.
    init = step_events.StepEvents.__init__
    monkeypatch.setattr(
        step_events.StepEvents,
        "__init__",
        lambda self, run_id, sink, **kw: init(self, run_id, sink, flush_after=3600.0),
    )
    await start_refund(engine, "refund 1002")  # warm: graphs built, statements prepared
    counted: dict[str, Counted] = {}
    with counting() as counted["start"]:
        run = await start_refund(engine)
    with counting() as counted["decide"]:
        await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    with counting() as counted["resume"]:
        assert await engine.drain() == 1
    finished = await engine.runs.get(run.run_id)
    assert finished is not None
    assert finished.status == "completed"

    totals = {phase: c.total for phase, c in counted.items()}
    over = {
        phase: dict(counted[phase].statements) for phase in totals if totals[phase] > BUDGET[phase]
    }
    assert not over, f"statements per phase {totals}, budget {BUDGET}; sent: {over}"
