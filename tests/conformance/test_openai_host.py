"""AGENT-HOOKS-0.1 conformance through the OpenAI Agents SDK host: every vector of the kit, run
by the SDK's own ``Runner`` on an ``agents.Agent`` governed by ``graphs.hosts.openai``.

The kit's harness contract is framework-neutral (``setup`` with the vector's interceptors,
``run`` returning a ``RunRecord``), so it drives this host as it drives the LangGraph ones:

- the vector's model script is an ``agents.models.interface.Model`` (the n-th model call of
  the run answers with the n-th scripted response; the SDK does not call the model again
  for a turn it resumes), its tools are ``FunctionTool``\\ s; the host governs both in place
  (the model becomes a ``GovernedModel``, ``graphs.hosts.openai.model_calls``);
- ``agent_startup`` and ``input`` go through the runner's admission, ``output`` and
  ``agent_shutdown`` through the runner's own functions, every ``pre_model_call`` and
  ``post_model_call`` through the governed model, every ``pre_tool_call`` and
  ``post_tool_call`` through ``HostRun`` (one session per run, across its pauses);
- a deny at a model point raises ``ModelCallBlocked`` out of ``Runner.run``, and the harness
  settles the run blocked, with the reason it carries;
- an escalation at ``pre_tool_call`` pauses the SDK's run (``needs_approval`` answers yes),
  the harness plays the human with the vector's scripted resolver (``approval_desk``), and
  resumes the ``RunState`` as the runner does: ``state.approve(item)`` lets the call ask the
  engine again (the kept answer decides it), ``state.reject(item)`` emits the call's record
  first (``HostRun.record_rejection``).

The host buffers a model's answer until ``post_model_call`` allowed it (it does not release
output incrementally), so the harness does not claim ``incremental_output``, and the kit skips
the vectors that need it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agent_hooks import ApprovalOutcome
from agent_hooks.ctk import Capability, RunOutcome, RunRecord, Scenario, run_vector
from agent_hooks.declaration import HostRegistry, HostSurface
from agents import Agent, FunctionTool, ModelSettings, RunConfig, RunState
from agents import Runner as SDKRunner
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model, ModelTracing
from agents.tool import Tool
from agents.tool_context import ToolContext
from agents.usage import Usage
from langgraph.checkpoint.memory import InMemorySaver
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputItem,
    ResponseOutputMessage,
    ResponseOutputText,
)

from approvals.memory import MemoryApprovalRequests, MemoryStore, MemoryToolLedger
from approvals.model import PendingCall
from approvals.ports import NewRequest
from graphs.hooks.governance import SessionHolder
from graphs.hosts.openai import OpenAIAgent, OpenAIHost
from graphs.hosts.openai.calls import HostRun, enter, leave
from graphs.hosts.openai.input import admit
from graphs.hosts.openai.model_calls import ModelCallBlocked, governed_run_config
from graphs.hosts.openai.step import call_id, emit_output, record_rejection
from graphs.tool_call.deps import GraphDeps
from tests.conformance.approval_desk import ApprovalDesk, DeskSlot, Question
from tests.conformance.harness import (
    GRAPH_NAME,
    MAX_ROUNDS,
    PRINCIPAL,
    SHUTDOWN_REASONS,
    LangGraphHarness,
    _Prepared,
)
from tests.conformance.scenario import ModelScriptExhausted, ScriptedToolError

#: What the OpenAI host mediates: model calls (through its governed model) and tool calls
#: (each its own interruption).
CAPABILITIES: frozenset[Capability] = frozenset(
    {
        Capability.MODEL_CALLS,
        Capability.TOOL_CALLS,
        Capability.PARALLEL_TOOL_CALLS,
        Capability.INT64_JSON,
        Capability.BIGINT_JSON,
        Capability.HOST_DECLARATION,
    }
)


class OpenAIHarness:
    """The kit's ``Harness`` for the OpenAI-SDK host. Wiring a vector (``setup``,
    ``setup_declared``: the governance and the approval desk) is the LangGraph harness's;
    the surface is this host's own, from its capabilities (``approvals.declaration.json``
    declares the LangGraph host's, model points included, so it is not this host's)."""

    name = "approvals-openai-agents"
    tool_seam_host_error = "continue"

    def __init__(self) -> None:
        self.capabilities: set[Capability] = set(CAPABILITIES)
        self._wiring = LangGraphHarness()

    def host_surface(self) -> HostSurface:
        return HostSurface.from_capabilities(
            sorted(c.value for c in self.capabilities), self.tool_seam_host_error
        )

    def declaration(self) -> dict[str, Any] | None:
        return None

    def setup(self, *args: Any, **kwargs: Any) -> None:
        self._wiring.setup(*args, **kwargs)

    def setup_declared(
        self, scenario: Scenario, document: dict[str, Any], registry: HostRegistry
    ) -> None:
        self._wiring.setup_declared(scenario, document, registry)

    async def run(self) -> RunRecord:
        prepared = self._wiring._prepared
        assert prepared is not None, "run() before setup()"
        return await _OpenAIRun(prepared).execute()

    def teardown(self) -> None:
        self._wiring.teardown()


class _ScriptedModel(Model):
    """The vector's model script, one response per model call of the run."""

    def __init__(self, scenario: Scenario) -> None:
        self._responses = list(scenario.model_script)
        self._calls = 0

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any | None,
        **more: Any,
    ) -> ModelResponse:
        if self._calls >= len(self._responses):
            raise ModelScriptExhausted(
                f"model call {self._calls + 1}; the vector scripts {len(self._responses)}"
            )
        response = self._responses[self._calls]
        self._calls += 1
        out: list[ResponseOutputItem] = []
        if response.content is not None:
            text = (
                response.content
                if isinstance(response.content, str)
                else json.dumps(response.content)
            )
            out.append(
                ResponseOutputMessage(
                    type="message",
                    id=f"msg-{self._calls}",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
                )
            )
        out.extend(
            ResponseFunctionToolCall(
                type="function_call",
                id=f"fc-{call['id']}",
                call_id=call["id"],
                name=call["name"],
                arguments=json.dumps(call["args"]),
                status="completed",
            )
            for call in response.tool_calls
        )
        return ModelResponse(output=out, usage=Usage(), response_id=None)

    def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any | None,
        **more: Any,
    ) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the conformance model does not stream")


def _tool(scenario: Scenario, name: str, invocations: list[dict[str, Any]]) -> FunctionTool:
    spec = scenario.tools[name]

    async def invoke(context: ToolContext[Any], arguments: str) -> Any:
        received = json.loads(arguments) if arguments else {}
        invocations.append({"name": spec.name, "args": received})
        value, is_error = spec.invoke(received)
        if is_error:
            raise ScriptedToolError(str(value))
        return value

    return FunctionTool(
        name=spec.name,
        description=f"scripted conformance tool {spec.name}",
        # A vector's schema is an informal note: every JSON object is accepted as it is.
        params_json_schema={"type": "object", "additionalProperties": True},
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )


class _HostDeskSlot(DeskSlot):
    """The desk's slot, with the pending record the OpenAI host pauses on (its call is
    paused by ``needs_approval``, not by ``interrupt()``).

    The SDK pauses a call once: a further liftable deny of the same emission after the
    first was answered (``on_approval=resume``) comes from ``on_invoke_tool`` of the approved
    call, where nothing can pause. There the host's slot answers in line (the engine keeps
    one request per call identity, so it is the stored decision of that request); here the
    desk's human answers in line."""

    def __init__(self, desk: ApprovalDesk, new: NewRequest, requests: MemoryApprovalRequests):
        super().__init__(desk, f"{new.call_id}|{new.tool}")
        self._new = new
        self._requests = requests
        self.request: PendingCall | None = None

    async def resolve(self, request: Any, /) -> Any:
        answer = await super().resolve(request)
        waiting = self.question
        if waiting is not None and waiting.consult > 0:
            await self._desk.answer([waiting])
            self._waiting = None
            self._consults -= 1
            return await super().resolve(request)
        if self.awaiting_human:
            self.request, _ = await self._requests.open(self._new)
        return answer

    @property
    def question(self) -> Question | None:
        return self._waiting


class _OpenAIRun:
    """One vector's run: admit, run the SDK, answer each interruption, resume, settle."""

    def __init__(self, prepared: _Prepared) -> None:
        self._scenario = prepared.scenario
        self._desk = prepared.desk
        self._invocations: list[dict[str, Any]] = []
        self._requests = MemoryApprovalRequests(store := MemoryStore())
        self._asked: dict[str, _HostDeskSlot] = {}
        self._deps = GraphDeps(
            checkpointer=InMemorySaver(),
            requests=self._requests,
            ledger=MemoryToolLedger(store),
            slots=self._slot,
        )
        agent = Agent(
            name=GRAPH_NAME,
            model=_ScriptedModel(prepared.scenario),
            tools=[_tool(prepared.scenario, n, self._invocations) for n in prepared.scenario.tools],
        )
        self._host = OpenAIHost(GRAPH_NAME, OpenAIAgent(agent, governance=prepared.governance))
        self._run_id = str(uuid.uuid4())
        self._holder = SessionHolder()

    def _slot(self, new: NewRequest) -> _HostDeskSlot:
        slot = _HostDeskSlot(self._desk, new, self._requests)
        self._asked[new.call_id] = slot
        return slot

    async def execute(self) -> RunRecord:
        error: str | None = None
        final: Any = None
        try:
            final, blocked = await self._until_settled()
        except Exception as exc:  # a host failure ends the run visibly, as the runner does
            outcome, error = RunOutcome.ERROR, f"{type(exc).__name__}: {exc}"
        else:
            outcome = RunOutcome.BLOCKED if blocked is not None else RunOutcome.COMPLETED
            if blocked is not None:
                error, final = json.dumps(blocked, sort_keys=True), None
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

    async def _until_settled(self) -> tuple[Any, dict[str, Any] | None]:
        host = self._host
        session = self._holder.get(
            host.governance, graph=host.name, run_id=self._run_id, principal=PRINCIPAL
        )
        admitted, blocked = await admit(session, host, self._scenario.input["content"])
        if blocked is not None:
            return None, blocked
        given: Any = admitted
        rejected: list[Any] = []
        for _ in range(MAX_ROUNDS):
            current = HostRun(
                run_id=self._run_id,
                thread_id=self._run_id,
                principal=PRINCIPAL,
                agent_name=host.name,
                deps=self._deps,
                session=session,
            )
            token = enter(current)
            try:
                for item in rejected:
                    await record_rejection(current, host, item, call_id(item) or "")
                result = await SDKRunner.run(
                    host.agent,
                    given,
                    max_turns=MAX_ROUNDS,
                    run_config=governed_run_config(
                        RunConfig(tracing_disabled=True, workflow_name=host.name)
                    ),
                )
            except ModelCallBlocked as model_stopped:
                return None, model_stopped.reason
            finally:
                leave(token)
            if not result.interruptions:
                final = result.final_output
                answer = final if isinstance(final, str) or final is None else json.dumps(final)
                released, stopped = await emit_output(session, answer)
                return released, stopped
            state: RunState[Any, Any] = result.to_state()
            asked = {c: self._asked[c] for c in (call_id(i) or "" for i in result.interruptions)}
            questions = [slot.question for slot in asked.values() if slot.question is not None]
            await self._desk.answer(questions)
            rejected = []
            for item in result.interruptions:
                slot = asked[call_id(item) or ""]
                decided = self._desk.decided(slot.question) if slot.question else None
                answer_ = decided.answer if decided is not None else None
                if getattr(answer_, "outcome", None) is ApprovalOutcome.REJECT:
                    state.reject(item, rejection_message="rejected by the approver")
                    rejected.append(item)
                else:
                    # The call asks the engine again; the kept answer (or failure) decides it.
                    state.approve(item)
            given = state
        raise RuntimeError(f"the run was still paused after {MAX_ROUNDS} rounds")


async def test_vector_through_the_openai_sdk_host(ctk_vector: dict[str, Any]) -> None:
    result = await run_vector(OpenAIHarness(), ctk_vector)
    if result.status == "skip":
        pytest.skip(result.detail)
    assert result.status == "pass", f"{result.id} {result.title}:\n" + "\n".join(result.failures)
