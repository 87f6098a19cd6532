"""The engine's bookkeeping for a run, carried in the run's config (``configurable``).

A host graph the engine did not build (a ``create_agent`` agent with ``ApprovalMiddleware``)
keeps its own state schema: which run an invocation belongs to, who started it, the
registered graph's name and the engine's ports reach its hooks through the config the runner
invokes it with, never through the agent's state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig

from graphs.tool_call.deps import GraphDeps

#: What the engine's runner puts in a run's ``configurable``: the run, who started it, the
#: registered graph's name and the engine's ports.
RUN_ID_KEY = "approvals_run_id"
PRINCIPAL_KEY = "approvals_principal"
GRAPH_KEY = "approvals_graph"
DEPS_KEY = "__approvals_deps"


class NotRunByEngine(RuntimeError):
    """A governed agent was invoked without the engine's run in its config."""

    def __init__(self, missing: str) -> None:
        super().__init__(
            f"ApprovalMiddleware found no {missing!r} in the run's configurable: run the agent "
            "through the approvals engine (register it in approvals.toml [graphs], then "
            "`approvals runs start` or Runner.start), which records the run and its approvals"
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class EngineRun:
    """The engine's bookkeeping for the invocation a hook runs in."""

    run_id: str
    principal: str
    graph: str
    thread_id: str
    deps: GraphDeps
    #: The checkpoint the step runs from: the state version an approver's decision binds.
    state_version: str | None

    @classmethod
    def of(cls, config: RunnableConfig) -> EngineRun:
        configurable = config.get("configurable") or {}
        values: dict[str, Any] = {}
        for key in (RUN_ID_KEY, PRINCIPAL_KEY, GRAPH_KEY, "thread_id"):
            value = configurable.get(key)
            if not isinstance(value, str) or not value:
                raise NotRunByEngine(key)
            values[key] = value
        deps = configurable.get(DEPS_KEY)
        if not isinstance(deps, GraphDeps):
            raise NotRunByEngine(DEPS_KEY)
        return cls(
            run_id=values[RUN_ID_KEY],
            principal=values[PRINCIPAL_KEY],
            graph=values[GRAPH_KEY],
            thread_id=values["thread_id"],
            deps=deps,
            state_version=(configurable.get("checkpoint_map") or {}).get(""),
        )


def engine_configurable(
    *, run_id: str, principal: str, graph: str, deps: GraphDeps
) -> dict[str, Any]:
    """The ``configurable`` entries the runner invokes a run with."""
    return {RUN_ID_KEY: run_id, PRINCIPAL_KEY: principal, GRAPH_KEY: graph, DEPS_KEY: deps}
