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

import pytest

from bench.cycle_stats import StatementCounter
from graphs.run import step_events
from tests.integration.helpers import start_refund
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")

#: Statements per phase of the refund example's approval cycle, as sent today (the refund
#: example looks the order up, is checked by its policy and preconditions, and runs the tool;
#: ``bench/approval_cycle.py --count`` counts the bench's one-call cycle agent the same way).
BUDGET = {"start": 36, "decide": 2, "resume": 23}


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
    counted = {phase: StatementCounter() for phase in BUDGET}
    with counted["start"].installed():
        run = await start_refund(engine)
    with counted["decide"].installed():
        await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    with counted["resume"].installed():
        assert await engine.drain() == 1
    finished = await engine.runs.get(run.run_id)
    assert finished is not None
    assert finished.status == "completed"

    totals = {phase: c.count for phase, c in counted.items()}
    over = {
        phase: dict(counted[phase].by_statement)
        for phase in totals
        if totals[phase] > BUDGET[phase]
    }
    assert not over, f"statements per phase {totals}, budget {BUDGET}; sent: {over}"
