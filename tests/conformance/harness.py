"""The AGENT-HOOKS-0.1 conformance harness for our LangGraph host.

Every vector runs through the graph ``graphs.hosts.langgraph.agent.build_agent`` compiles: the
governed loop (``start`` / ``agent`` / one ``tools`` task per call) with one ``Session`` per run,
handed to the nodes in a ``SessionHolder`` as ``graphs/hosts/langgraph/host.py`` does, which also
emits the run's ``agent_startup`` and ``input`` through it before the graph is invoked
(``graphs.run.admission``, so that no checkpoint holds a denied input). The chat model replays the
vector's ``model_script``; each scripted tool is a ``GovernedTool`` that goes through the tool
step (validation, ``pre_tool_call``, the execution ledger, ``post_tool_call``).

Escalations take our durable path: the emitter's resolver is
``graphs.hooks.approval.SLOT_RESOLVER``, which asks the approval slot of the emission in
progress; the harness's slots (``approval_desk``) pause the graph with ``interrupt()``, the harness
plays the human with the vector's scripted resolver, and resumes the thread with
``Command(resume=...)``, round after round, until the run completes, is blocked or fails. For
declaration vectors the emitter is built from the vector's document by the loader, with the
document's resolver name bound to the slot resolver, so escalations there take the same path.

The graph runs on LangGraph's ``InMemorySaver`` and on the in-memory adapter
(``approvals.memory``, one store per run) so the kit can construct the harness with no
arguments. That adapter passes the same port contract tests as the PostgreSQL one
(``tests/contracts``); the engine's guarantees across processes are proven against PostgreSQL
in ``tests/integration``.

Run it with ``pytest tests/conformance``, or through the kit's own pytest plugin (installed as
an entry point): ``pytest --agent-hooks-harness=tests.conformance.harness:LangGraphHarness
tests/conformance``. See docs/conformance.md.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from agent_hooks import (
    AgentContext,
    ApprovalResolver,
    CompositionConfig,
    EnforcementMode,
    InterceptionEmitter,
    Interceptor,
)
from agent_hooks.ctk import Capability, RunOutcome, RunRecord, Scenario, redact_paths
from agent_hooks.declaration import HostRegistry, HostSurface
from agent_hooks.emitter import IdentityProvider
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from approvals.memory import (
    MemoryApprovalRequests,
    MemorySideEffects,
    MemoryStore,
    MemoryToolLedger,
)
from graphs.examples.effects import extras
from graphs.hooks.approval import SLOT_RESOLVER
from graphs.hooks.emitter import emitter_class
from graphs.hooks.governance import Governance, SessionHolder
from graphs.hosts.langgraph.agent import build_agent
from graphs.run.admission import input_gate
from graphs.tool_call.deps import GraphDeps
from tests.conformance.approval_desk import ApprovalDesk, Question
from tests.conformance.scenario import scripted_model, scripted_tools

DECLARATION_PATH = Path(__file__).with_name("approvals.declaration.json")
GRAPH_NAME = "ctk-agent"
PRINCIPAL = "ctk-user"
MODEL_ID = "ctk-scripted"
#: More pause/resume rounds than any vector needs: a loop that keeps pausing is a defect.
MAX_ROUNDS = 16
#: The kit's identity provider that always raises (§10.1 provider-failure vectors).
FAULTY_PROVIDER = "ctk-fault"
#: ``agent_shutdown`` reasons (``summary.reason`` is completed | error | cancelled).
SHUTDOWN_REASONS = {
    RunOutcome.COMPLETED: "completed",
    RunOutcome.BLOCKED: "error",
    RunOutcome.ERROR: "error",
}

#: What we claim (``LangGraphHarness.capabilities``); ``approvals.declaration.json`` says the same.
CAPABILITIES: frozenset[Capability] = frozenset(
    {
        Capability.MODEL_CALLS,
        Capability.TOOL_CALLS,
        # Each call of a model turn is its own Send task, paused and resumed on its own.
        Capability.PARALLEL_TOOL_CALLS,
        # A thread takes new input after a run ends.
        Capability.MULTI_TURN,
        # Python holds integers of any size; the emitter denies any beyond 2^53
        # (context_invalid) before a node writes them to the state, so the checkpoint
        # serializer's 64-bit limit is never reached (docs/conformance.md).
        Capability.INT64_JSON,
        Capability.BIGINT_JSON,
        Capability.HOST_DECLARATION,
    }
)


@dataclass(frozen=True, slots=True)
class _Prepared:
    scenario: Scenario
    governance: Governance
    desk: ApprovalDesk


class LangGraphHarness:
    """The kit's ``Harness`` for the governed LangGraph loop."""

    name = "approvals-langgraph"
    tool_seam_host_error = "continue"

    def __init__(self) -> None:
        self.capabilities: set[Capability] = set(CAPABILITIES)
        self._prepared: _Prepared | None = None

    # ---- the kit's Harness protocol ----------------------------------------------

    def host_surface(self) -> HostSurface:
        return HostSurface.from_capabilities(
            sorted(c.value for c in self.capabilities), self.tool_seam_host_error
        )

    def declaration(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(DECLARATION_PATH.read_text(encoding="utf-8"))
        return document

    def setup(
        self,
        scenario: Scenario,
        interceptors: list[Interceptor],
        resolver: ApprovalResolver | None,
        mode: EnforcementMode,
        composition: CompositionConfig,
        identity_provider: str | None,
        redact_for_approval: list[str] | None = None,
    ) -> None:
        provider: str | IdentityProvider | None = identity_provider
        if identity_provider == FAULTY_PROVIDER:
            provider = IdentityProvider(FAULTY_PROVIDER, _faulty_identity)
        governance = Governance(
            interceptors=tuple(interceptors),
            mode=mode,
            composition=composition,
            identity_provider=provider,  # type: ignore[arg-type]  # the emitter takes both
            names=tuple(f"interceptor-{i}" for i in range(len(interceptors))),
        )
        paths = list(redact_for_approval or [])
        if resolver is None or paths:
            governance = Governance(emitter=_adjusted(governance, resolver is not None, paths))
        self._prepared = _Prepared(scenario, governance, ApprovalDesk(resolver))

    def setup_declared(
        self, scenario: Scenario, document: dict[str, Any], registry: HostRegistry
    ) -> None:
        def emitter(resolver: ApprovalResolver) -> InterceptionEmitter:
            # The emitter the setting picks (APPROVALS_EMITTER), as Governance.new_emitter does.
            return emitter_class().from_declaration_value(
                document, _routed_through(registry, resolver)
            )

        # Built once now so a refusal surfaces here, as the kit requires (never at run time);
        # the session builds its own from the same document.
        probe = emitter(cast(ApprovalResolver, SLOT_RESOLVER))
        assert probe.declaration is not None
        named = probe.declaration.to_wire()["configuration"]["approval"].get("resolver")
        human = registry._approval_resolver_ref(named) if isinstance(named, str) else None
        self._prepared = _Prepared(scenario, Governance(emitter=emitter), ApprovalDesk(human))

    async def run(self) -> RunRecord:
        assert self._prepared is not None, "run() before setup()"
        return await _HarnessRun(self._prepared).execute()

    def teardown(self) -> None:
        self._prepared = None


class _HarnessRun:
    """One vector's run: start the thread, answer every pause, resume, settle."""

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
        self._graph = build_agent(
            name=GRAPH_NAME,
            model=scripted_model(prepared.scenario),
            tools=scripted_tools(prepared.scenario, self._invocations),
            deps=deps,
            governance=prepared.governance,
            model_id=MODEL_ID,
        )
        self._run_id = str(uuid.uuid4())
        # One holder for every invocation of the run: one session, one monotonic sequence,
        # and its records across the pauses.
        self._holder = SessionHolder()
        self._config: RunnableConfig = {
            "configurable": {"thread_id": self._run_id, **self._holder.config()}
        }

    async def execute(self) -> RunRecord:
        error: str | None = None
        final: Any = None
        try:
            values = await self._until_settled()
        except Exception as exc:  # a host failure ends the run visibly, as the runner does
            outcome, error = RunOutcome.ERROR, f"{type(exc).__name__}: {exc}"
        else:
            if isinstance(values.get("blocked"), dict):
                outcome = RunOutcome.BLOCKED
                error = json.dumps(values["blocked"], sort_keys=True)
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
        # As the runner does: agent_startup and input are emitted before the graph is invoked,
        # and the graph gets what input admitted (graphs/run/admission.py).
        gate = input_gate(self._graph)
        assert gate is not None
        admission = await gate.admit(
            self._holder, run_id=self._run_id, principal=PRINCIPAL, message=content
        )
        if admission.state is None:
            return {"blocked": admission.blocked}
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


def _faulty_identity(_ctx: AgentContext) -> str:
    raise RuntimeError("ctk scripted provider fault")


def _adjusted(
    governance: Governance, with_resolver: bool, redact: list[str]
) -> Callable[[ApprovalResolver], InterceptionEmitter]:
    """An emitter factory for what ``Governance``'s fields cannot say: a host with no approval
    seam (the vector registers no resolver) and the kit's approval redactor."""

    def build(resolver: ApprovalResolver) -> InterceptionEmitter:
        emitter = emitter_class()(
            mode=governance.mode,
            resolver=resolver if with_resolver else None,
            timeout=governance.timeout,
            composition=governance.composition,
            identity_provider=governance.identity_provider,
        )
        for name, interceptor in zip(governance.names, governance.interceptors, strict=True):
            emitter.register(interceptor, name=name)
        if redact:
            emitter.set_approval_redactor(lambda ctx: redact_paths(ctx, redact))
        return emitter

    return build


def _routed_through(registry: HostRegistry, resolver: ApprovalResolver) -> HostRegistry:
    """The kit's registry with every approval resolver name bound to ``resolver`` (the slot
    resolver), and its kinds, identity providers and redactors as the kit registered them.

    ``HostRegistry`` refuses a second registration of a name and has no public lookup, so this
    copies through its lookup methods; the kit's resolvers become the human behind the desk.
    """
    names = registry.names()
    out = HostRegistry.for_conformance(registry.surface)
    for kind in names["kinds"]:
        kind_resolver = registry._kind_resolver(kind)
        assert kind_resolver is not None
        out.kind(kind, kind_resolver)
    for provider in names["identity_providers"]:
        fn = registry._identity_fn(provider)
        assert fn is not None
        out.identity_provider(provider, fn)
    for redactor in names["approval_redactors"]:
        redact = registry._redactor_fn(redactor)
        assert redact is not None
        out.approval_redactor(redactor, redact)
    for name in names["approval_resolvers"]:
        out.approval_resolver(name, resolver)
    return out
