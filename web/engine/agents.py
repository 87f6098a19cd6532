"""The LangGraph side of the engine (saver, registry, runner, worker, expiry sweeper, and the
examples' side-effect log), built on first use: importing LangGraph takes seconds, and most CLI
commands (decide, pending, audit, users, ...) never need it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING

from storage.db import is_transient
from storage.statements import PgStatements
from web.engine.adapters import Adapters
from web.settings import revealed

if TYPE_CHECKING:
    from graphs.examples.effects import SqlSideEffects
    from graphs.hosts.registry import GraphRegistry
    from graphs.orchestration.runner import Runner
    from graphs.orchestration.worker import ExpirySweeper, Worker


@dataclass(frozen=True)
class Graphs:
    """The graphs by name, and what runs and resumes them."""

    registry: GraphRegistry
    runner: Runner
    worker: Worker
    sweeper: ExpirySweeper


class AgentSide:
    """The LangGraph side on the engine's adapters, each part built on first use."""

    def __init__(self, adapters: Adapters) -> None:
        self._adapters = adapters

    @cached_property
    def graphs(self) -> Graphs:
        """The registry, runner, worker and sweeper (built, with LangGraph, on first use)."""
        return build_graphs(self._adapters, self.effects)

    @cached_property
    def effects(self) -> SqlSideEffects:
        """The examples' side-effect log (their own table, ``graphs/examples/schema.sql``),
        given to their graphs in ``GraphDeps.extras``; tests and the demo read it back."""
        # Function-local for the same reason as build_graphs': the examples import LangGraph.
        from graphs.examples.effects import SqlSideEffects

        return SqlSideEffects(PgStatements(self._adapters.db))


def build_graphs(adapters: Adapters, effects: SqlSideEffects) -> Graphs:
    """The LangGraph side on ``adapters``: the saver on their pool, the registry of the
    configured graphs, the runner, the worker and the expiry sweeper."""
    # Function-local on purpose: importing LangGraph takes seconds (see the module's
    # docstring), not to dodge an import loop.
    from graphs.examples.effects import extras
    from graphs.hosts.openai.ports import openai_extras
    from graphs.hosts.registry import EXAMPLE_GRAPHS, GraphRegistry
    from graphs.orchestration.runner import Runner
    from graphs.orchestration.worker import ExpirySweeper, Worker
    from graphs.tool_call.deps import GraphDeps
    from storage.checkpoints import PgResumeChecks, make_saver
    from storage.openai_runs import PgOpenAIRunStates
    from storage.openai_sessions import PgOpenAISessions
    from web.security import secret_key

    settings, db = adapters.settings, adapters.db
    saver = make_saver(db.pool)
    deps = GraphDeps(
        checkpointer=saver,
        requests=adapters.requests,
        ledger=adapters.ledger,
        request_ttl=timedelta(seconds=settings.request_ttl_seconds),
        reconcile_group=settings.operator_group,
        # The OpenAI-SDK agents' server-side RunStates (docs/openai-agents.md), sealed
        # under the key sessions are signed with.
        extras={
            **extras(effects),
            **openai_extras(
                PgOpenAIRunStates(db),
                secret=secret_key(revealed(settings.secret_key), settings.data_dir),
                sessions=PgOpenAISessions(db),
            ),
        },
    )
    examples = EXAMPLE_GRAPHS if settings.examples else {}
    registry = GraphRegistry(deps, {**examples, **settings.graph_entries()})
    runner = Runner(
        registry=registry,
        runs=adapters.runs,
        checks=PgResumeChecks(db, saver.serde),
        transient=is_transient,
        events=adapters.run_events.publish,
    )
    worker = Worker(runner=runner, queue=adapters.queue, concurrency=settings.worker_concurrency)
    sweeper = ExpirySweeper(expiry=adapters.expiry, interval=settings.sweep_interval_seconds)
    return Graphs(registry=registry, runner=runner, worker=worker, sweeper=sweeper)
