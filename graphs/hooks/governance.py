"""The AGENT-HOOKS-0.1 host side of a run: one emitter and one context source per invocation.

Every node of a governed graph emits through the ``Session`` of the invocation it runs in, so a
run's interceptions share one session id and one monotonic sequence, and the runner collects
their payload-free records when the invocation ends (it stores them with the run's settlement).

Lifting a liftable deny is durable: the node that emits names an ``ApprovalSlot``
(``graphs.hooks.approval``) for what it asks, and the emitter's resolver asks that slot. When the
slot has no human answer yet, the emission is suspended: its record is withdrawn (it has no
outcome) and the node pauses with ``interrupt()``. On resume the node runs again, emits the same
question again, and the slot now answers with the decision a human made, echoing the context
identity as §9 requires.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from agent_hooks import (
    AgentContextBuilder,
    ApprovalResolver,
    CompositionConfig,
    EmitOutcome,
    EnforcementMode,
    InterceptionBlocked,
    InterceptionEmitter,
    InterceptionRecord,
    Interceptor,
)
from langchain_core.runnables import RunnableConfig

from approvals.errors import DatabaseUnavailable
from approvals.tracing import annotate, run_span
from graphs.hooks.approval import SLOT_RESOLVER, ApprovalSlot, asking
from graphs.hooks.emitter import JsonContext, emitter_class

FRAMEWORK = "langgraph"
SESSION_KEY = "__approvals_session"
#: How many times an emission asks a slot that could not answer because the database was busy
#: (the emitter's resolver timeout ran out while it waited for a pool connection). The slot's
#: read keeps its place in the pool's queue across attempts (``graphs.hooks.flights``), so
#: three attempts wait three resolver timeouts (15 s by default) for one connection.
SLOT_ATTEMPTS = 3


EmitterFactory = Callable[[ApprovalResolver], InterceptionEmitter]

#: The composition of a governance that names none: every interceptor answers before anyone is
#: asked (``sequential/run_all``), a deny no human may lift outranks a liftable one wherever it
#: stands in the list, and only when nothing denies does the first escalation go to a human.
#: Not the SDK's default (``sequential/first_deny``, ``on_approval: stop``): there an approved
#: escalation ends the fold, so an ``interrupt_on`` or sensitive-tool escalation placed before a
#: policy had a human approve calls the policy denies, and the policy was never consulted.
DENY_WINS = CompositionConfig.run_all()


@dataclass(frozen=True, kw_only=True)
class Governance:
    """How a graph's interceptions are evaluated: its interceptors (in order), the composition
    profile, the enforcement mode, the per-interceptor timeout and the identity provider.

    ``composition`` is ``DENY_WINS`` unless given (``None`` means it too): a deny anywhere wins
    before any human is asked. A composition given explicitly is the AGENT-HOOKS profile it
    names, ``sequential/first_deny`` included, where an approved escalation skips the
    interceptors after it.

    ``emitter`` replaces all of that with a factory, for hosts that build their emitter from a
    host declaration document; it receives the resolver to register."""

    interceptors: Sequence[Interceptor] = ()
    mode: EnforcementMode = EnforcementMode.ENFORCE
    composition: CompositionConfig | None = DENY_WINS
    timeout: float | None = 5.0
    identity_provider: str | None = "jcs-sha256"
    emitter: EmitterFactory | None = None
    names: Sequence[str] = field(default=())

    def new_emitter(self) -> InterceptionEmitter:
        """The emitter for one session: ``graphs.hooks.emitter.HostEmitter``, or the SDK's
        ``InterceptionEmitter`` when ``APPROVALS_EMITTER=sdk`` (read here, per session)."""
        resolver = cast(ApprovalResolver, SLOT_RESOLVER)
        if self.emitter is not None:
            return self.emitter(resolver)
        emitter = emitter_class()(
            mode=self.mode,
            resolver=resolver,
            timeout=self.timeout,
            composition=DENY_WINS if self.composition is None else self.composition,
            identity_provider=self.identity_provider,
        )
        for i, interceptor in enumerate(self.interceptors):
            name = self.names[i] if i < len(self.names) else f"{type(interceptor).__name__}#{i}"
            emitter.register(interceptor, name=name)
        return emitter


class Session:
    """One invocation of one run: its emitter, its context source and its records."""

    def __init__(
        self,
        governance: Governance,
        *,
        graph: str,
        run_id: str,
        principal: str,
        first_sequence: int = 0,
    ) -> None:
        self.governance = governance
        self.graph = graph
        self.run_id = run_id
        self.principal = principal
        self.emitter = governance.new_emitter()
        self._builder = AgentContextBuilder(
            agent_id=graph, framework=FRAMEWORK, session_id=run_id
        ).with_l2(actor={"id": principal, "kind": "human"})
        self._sequence = itertools.count(first_sequence)
        self._withdrawn: list[InterceptionRecord] = []
        self.shut_down = False
        #: Why a deny stopped the run, when a node stopped it (``graphs.langchain.middleware``):
        #: what the runner settles the run from even when the stopped agent is a node of another
        #: graph, whose state does not carry the agent's.
        self.blocked: dict[str, Any] | None = None

    def context(
        self,
        point: str,
        *,
        extensions: dict[str, Any] | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """A new context for ``point`` (a builder method name), with this run's envelope."""
        ctx: dict[str, Any] = JsonContext(getattr(self._builder, point)(**fields))
        ctx["sequence"] = next(self._sequence)
        if extensions:
            # What policies read beyond the contract's fields (the run is the session, the
            # graph the agent): the tool's metadata and how often tools ran in this run.
            ctx["extensions"] = {"approvals": extensions}
        return ctx

    async def emit(self, ctx: dict[str, Any], slot: ApprovalSlot | None = None) -> EmitOutcome:
        """Emit ``ctx``; raises ``InterceptionBlocked`` on a deny. A liftable deny whose slot
        waits for a human suspends the run instead (this call does not return). A slot that
        could not answer because the database was busy is asked again, up to
        ``SLOT_ATTEMPTS`` times (``DatabaseUnavailable`` after that)."""
        # The emitter rewrites the context's top level when it applies a transform (nested
        # values are replaced, never changed): a shallow copy is the context as given.
        given = dict(ctx) if slot is not None else None
        try:
            for attempt in range(1, SLOT_ATTEMPTS + 1):
                try:
                    return await self._emit_once(ctx, slot)
                except InterceptionBlocked as blocked:
                    if slot is None or not slot.failed:
                        raise
                    if attempt == SLOT_ATTEMPTS or not getattr(slot, "retryable", False):
                        _abandon(slot)
                        # The answer could not be read: fail the step so it is retried,
                        # rather than deny a call a human may have approved or pause on one
                        # already decided.
                        raise DatabaseUnavailable(
                            f"could not read the decision for {ctx.get('interception_point')}"
                        ) from blocked
                    # Safe to emit again: the interceptors are pure, and the slot's only
                    # effect (the request opened or the grant used for this call) is its own,
                    # awaited again, not repeated (``graphs.hooks.flights``). The failed
                    # emission has no outcome: its repeat is the record.
                    self._withdrawn.append(blocked.result)
                    assert given is not None
                    ctx.clear()
                    ctx.update(given)
                await asyncio.sleep(0.05 * attempt)
        except asyncio.CancelledError:
            # The step itself is cancelled: its slot's read is not to outlive it.
            _abandon(slot)
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _emit_once(self, ctx: dict[str, Any], slot: ApprovalSlot | None) -> EmitOutcome:
        point = ctx.get("interception_point")
        found = ctx.get("tool_call")
        call: dict[str, Any] = found if isinstance(found, dict) else {}
        with (
            asking(slot),
            run_span(
                "approvals.intercept",
                self.run_id,
                point=point,
                graph=self.graph,
                tool=call.get("name"),
                call_id=call.get("id"),
            ) as span,
        ):
            try:
                outcome = await self.emitter.emit(ctx)
                verdict = outcome.record.verdict
                annotate(span, verdict=verdict.decision, reason=verdict.reason)
                return outcome
            except InterceptionBlocked as blocked:
                verdict = blocked.result.verdict
                # The reason is a code; the message may quote the arguments: never sent.
                annotate(span, verdict=verdict.decision, reason=verdict.reason)
                if slot is not None and not slot.failed and slot.awaiting_human:
                    # A suspended emission has no outcome yet: its repeat on resume is the record.
                    self._withdrawn.append(blocked.result)
                    slot.suspend(ctx)
                raise

    async def shutdown(self, reason: str) -> None:
        """``agent_shutdown``: the run ended (completed, blocked or failed). Never blocks."""
        if self.shut_down:
            return
        self.shut_down = True
        await self.emitter.emit_unchecked(self.context("agent_shutdown", reason=reason))

    def records(self) -> list[InterceptionRecord]:
        """This invocation's interception records, in order, without suspended emissions."""
        withdrawn = {id(r) for r in self._withdrawn}
        return [r for r in self.emitter.results if id(r) not in withdrawn]


def _abandon(slot: ApprovalSlot | None) -> None:
    """Cancel what ``slot`` still has in flight (``graphs.hooks.flights``), if it keeps any."""
    abandon = getattr(slot, "abandon", None)
    if abandon is not None:
        abandon()


@dataclass
class SessionHolder:
    """Put in an invocation's config by whoever runs the graph: the first governed node makes
    the session, the caller reads it afterwards (records, shutdown)."""

    first_sequence: int = 0
    session: Session | None = None

    def get(self, governance: Governance, *, graph: str, run_id: str, principal: str) -> Session:
        if self.session is None:
            self.session = Session(
                governance,
                graph=graph,
                run_id=run_id,
                principal=principal,
                first_sequence=self.first_sequence,
            )
        return self.session

    def config(self) -> dict[str, Any]:
        """The ``configurable`` entry that hands this holder to the graph's nodes."""
        return {SESSION_KEY: self}


def session_of(
    config: RunnableConfig, governance: Governance, *, graph: str, run_id: str, principal: str
) -> Session:
    """The invocation's session; a graph invoked without a holder gets a throwaway one per node
    (its records are not kept)."""
    holder = (config.get("configurable") or {}).get(SESSION_KEY)
    if not isinstance(holder, SessionHolder):
        holder = SessionHolder()
    return holder.get(governance, graph=graph, run_id=run_id, principal=principal)


def record_row(record: InterceptionRecord) -> dict[str, Any]:
    """A record as the run's settlement stores it: the wire record (payload-free, §10.3) and
    the columns a listing filters on."""
    wire = record.to_wire()
    verdict = wire.get("verdict") or {}
    decided_by = wire.get("decided_by")
    interceptor = None
    for summary in wire.get("verdicts") or []:
        if summary.get("index") == decided_by:
            interceptor = summary.get("name")
    return {
        "session_id": wire.get("session_id") or "",
        "sequence": wire.get("sequence", -1),
        "point": wire.get("interception_point"),
        "decision": verdict.get("decision"),
        "reason": verdict.get("reason"),
        "interceptor": interceptor,
        "mode": wire.get("mode"),
        "input_identity": wire.get("input_identity"),
        "enforced_identity": wire.get("enforced_identity"),
        "resolved_by": wire.get("resolved_by"),
        "record": wire,
    }
