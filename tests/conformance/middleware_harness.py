"""The AGENT-HOOKS-0.1 conformance harness for the ``create_agent`` host: every vector runs
through an ordinary langchain ``create_agent`` agent whose only governance is
``graphs.ApprovalMiddleware`` (with the vector's interceptors as its ``governance``).

Everything else is ``harness.LangGraphHarness``'s: the same scripted model (here as a
LangChain chat model), the vector's tools (here as LangChain tools whose arguments are a
JSON-schema document, as MCP tools are), the same approval desk playing the human, the same
in-memory ports. As the engine's runner does, the harness emits ``agent_startup`` and
``input`` through the agent's input gate before invoking it, and hands the middleware the
run's bookkeeping in the config (``graphs.run.config``), never in the agent's state.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from agent_hooks.ctk import RunOutcome, RunRecord
from agent_hooks.ctk.harness import ToolSpec
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from approvals.memory import (
    MemoryApprovalRequests,
    MemorySideEffects,
    MemoryStore,
    MemoryToolLedger,
)
from graphs import ApprovalMiddleware
from graphs.examples.effects import extras
from graphs.examples.scripted import ScriptedToolModel
from graphs.hooks.governance import SessionHolder
from graphs.langchain.middleware import BLOCKED
from graphs.langchain.tool_node import register_hosts
from graphs.run.admission import input_gate
from graphs.run.config import engine_configurable
from graphs.tool_call.deps import GraphDeps
from tests.conformance.approval_desk import Question
from tests.conformance.harness import (
    GRAPH_NAME,
    MAX_ROUNDS,
    MODEL_ID,
    PRINCIPAL,
    SHUTDOWN_REASONS,
    LangGraphHarness,
    _Prepared,
)
from tests.conformance.scenario import ScriptedToolError, scripted_reply


class MiddlewareHarness(LangGraphHarness):
    """The kit's ``Harness`` for a ``create_agent`` agent governed by ``ApprovalMiddleware``."""

    name = "approvals-create-agent"

    async def run(self) -> RunRecord:
        assert self._prepared is not None, "run() before setup()"
        return await _MiddlewareRun(self._prepared).execute()


def _tool(spec: ToolSpec, invocations: list[dict[str, Any]]) -> BaseTool:
    async def run(**received: Any) -> Any:
        invocations.append({"name": spec.name, "args": received})
        value, is_error = spec.invoke(received)
        if is_error:
            raise ScriptedToolError(str(value))
        return value

    return StructuredTool(
        name=spec.name,
        description=f"scripted conformance tool {spec.name}",
        # A vector's schema is an informal note: every JSON object is accepted as it is.
        args_schema={"type": "object"},
        coroutine=run,
    )


class _MiddlewareRun:
    def __init__(self, prepared: _Prepared) -> None:
        self._scenario = prepared.scenario
        self._desk = prepared.desk
        self._invocations: list[dict[str, Any]] = []
        store = MemoryStore()
        deps = GraphDeps(
            checkpointer=InMemorySaver(),
            requests=MemoryApprovalRequests(store),
            ledger=MemoryToolLedger(store),
            extras=extras(MemorySideEffects(store)),
            slots=prepared.desk.slot,
        )
        model = ScriptedToolModel(script=scripted_reply(prepared.scenario), model_name=MODEL_ID)
        self._graph = create_agent(
            model,
            tools=[_tool(spec, self._invocations) for spec in prepared.scenario.tools.values()],
            middleware=[ApprovalMiddleware(governance=prepared.governance)],
            checkpointer=deps.checkpointer,
        )
        register_hosts(self._graph, GRAPH_NAME, deps.catalog)
        self._run_id = str(uuid.uuid4())
        self._holder = SessionHolder()
        engine = engine_configurable(
            run_id=self._run_id, principal=PRINCIPAL, graph=GRAPH_NAME, deps=deps
        )
        self._config: RunnableConfig = {
            "configurable": {"thread_id": self._run_id, **self._holder.config(), **engine}
        }

    async def execute(self) -> RunRecord:
        error: str | None = None
        final: Any = None
        try:
            values = await self._until_settled()
        except Exception as exc:  # a host failure ends the run visibly, as the runner does
            outcome, error = RunOutcome.ERROR, f"{type(exc).__name__}: {exc}"
        else:
            blocked = values.get(BLOCKED)
            if isinstance(blocked, dict):
                outcome = RunOutcome.BLOCKED
                error = json.dumps(blocked, sort_keys=True)
            else:
                outcome = RunOutcome.COMPLETED
                messages = values.get("messages") or []
                last = messages[-1] if messages else None
                final = last.content if isinstance(last, AIMessage) else None
        session = self._holder.session
        if session is not None:
            await session.shutdown(SHUTDOWN_REASONS[outcome])
        records = session.records() if session is not None else []
        return RunRecord(
            outcome=outcome,
            final_output=final,
            tool_invocations=list(self._invocations),
            error=error,
            identities=[(r.input_identity, r.enforced_identity) for r in records],
            records=[r.to_wire() for r in records],
        )

    async def _until_settled(self) -> dict[str, Any]:
        content = self._scenario.input["content"]
        gate = input_gate(self._graph)
        assert gate is not None
        admission = await gate.admit(
            self._holder, run_id=self._run_id, principal=PRINCIPAL, message=content
        )
        if admission.state is None:
            return {BLOCKED: admission.blocked}
        payload: Any = admission.state
        for _ in range(MAX_ROUNDS):
            values = await self._graph.ainvoke(payload, self._config, durability="sync")
            paused = [
                (intr.id, Question.from_payload(intr.value))
                for intr in values.get("__interrupt__") or ()
            ]
            if not paused:
                return dict(values)
            await self._desk.answer([question for _, question in paused])
            payload = Command(resume={iid: question.payload() for iid, question in paused})
        raise RuntimeError(f"the run was still paused after {MAX_ROUNDS} rounds")
