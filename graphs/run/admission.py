"""Admitting a run's new message: ``agent_startup`` and ``input``, before the graph sees it.

LangGraph checkpoints a graph's input before its first node runs, so a message governed inside
the graph (by its ``start`` node) is already in the thread's checkpoint history when a policy
denies or masks it. The runner therefore governs a new message first, through the run's
``Session`` (the same emitter, session id and sequence the graph's nodes use), and hands the
graph only what ``input`` left of it: a denied message is written nowhere, a masked one only
masked.

One case must go through the graph: an ``input`` a human may lift (escalate). Only a graph can
pause for a decision (``interrupt()``), and a paused run needs its message in its state to go
on once approved. The runner's emission is then withdrawn (it has no outcome) and the graph's
``start`` node asks again with the point's approval slot; that message is persisted, as the
approver must read it.

A graph whose hook cannot pause for its input (an ``ApprovalMiddleware`` agent nested in another
graph, whose parent's state cannot carry the flag; a graph governed only at its tools by a
``GovernedToolNode``) has its input *held* instead: the runner records the input's approval
request and the run waits without the graph being invoked, so nothing of the message is in the
thread. The decision's resume asks ``input`` again (``release_held``), now answered from the
stored decision, and starts the graph with the message as approved, or ends the run blocked.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn

from agent_hooks import (
    AgentHooksCoreError,
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalResolution,
    InterceptionBlocked,
)
from langchain_core.messages import HumanMessage
from langgraph.pregel import Pregel

from approvals.identity import call_identity
from approvals.ports import NewRequest
from graphs.hooks.approval import ApprovalSlot, DeferredSlot
from graphs.hooks.governance import Governance, Session, SessionHolder
from graphs.run.config import EngineRun

#: The call id of a held input's approval request (one per run: the run's own message).
HELD_INPUT_CALL = "input:held"


def blocked_reason(blocked: InterceptionBlocked) -> dict[str, Any]:
    """Why a deny stopped the run, as the state's ``blocked`` keeps it (nothing of the
    denied content)."""
    verdict = blocked.result.verdict
    return {
        "point": blocked.result.interception_point.value,
        "reason": verdict.reason,
        "message": verdict.message,
    }


async def emit_startup(session: Session, tools: Sequence[str]) -> dict[str, Any] | None:
    """``agent_startup``; why the run is blocked, or ``None`` when it may go on."""
    try:
        await session.emit(session.context("agent_startup", tools_registered=list(tools)))
    except InterceptionBlocked as blocked:
        return blocked_reason(blocked)
    return None


async def emit_input(
    session: Session, content: Any, slot: ApprovalSlot | None
) -> tuple[Any, dict[str, Any] | None]:
    """``input`` for a user message: the content the run goes on with (rewritten by a
    transform), or why the run is blocked."""
    ctx = session.context("input", content=content, role="user")
    try:
        await session.emit(ctx, slot)
    except InterceptionBlocked as blocked:
        return None, blocked_reason(blocked)
    return ctx["input"]["content"], None


def point_slot(run: EngineRun, point: str, turn: int | str, shown: dict[str, Any]) -> ApprovalSlot:
    """Where a liftable deny at a non-tool point gets its human answer (as ``build_agent``'s
    nodes ask it), made only if the emission asks for one; no slot to ask when the content has
    no identity (the emitter denies it)."""

    def make() -> ApprovalSlot | None:
        call_id = f"{point}:{turn}"
        try:
            identity = call_identity(
                run_id=run.run_id, call_id=call_id, tool=f"@{point}", args=shown
            )
        except AgentHooksCoreError:
            return None
        new = NewRequest(
            run_id=run.run_id,
            thread_id=run.thread_id,
            call_id=call_id,
            tool=f"@{point}",
            shown={"point": point, **shown},
            args_schema={},
            identity=identity,
            reason=None,
            requested_by=run.principal,
            expires_at=datetime.now(UTC) + run.deps.request_ttl,
            state_version=run.state_version,
            allow_edit=False,
        )
        return run.deps.slot(new)

    return DeferredSlot(make)


class InputHeld(Exception):
    """The run's input waits for a human, outside the graph (see the module's text)."""

    def __init__(self, request_id: str) -> None:
        super().__init__(request_id)
        self.request_id = request_id


class _HeldSlot:
    """A point slot whose pause is the runner's hold, not an ``interrupt()``."""

    def __init__(self, slot: ApprovalSlot) -> None:
        self._slot = slot

    @property
    def awaiting_human(self) -> bool:
        return self._slot.awaiting_human

    @property
    def failed(self) -> bool:
        return self._slot.failed

    async def resolve(self, request: ApprovalRequest, /) -> ApprovalResolution:
        return await self._slot.resolve(request)

    def suspend(self, context: dict[str, Any]) -> NoReturn:
        stored = getattr(self._slot, "request", None)
        request_id = getattr(stored, "id", None)
        if not isinstance(request_id, str):
            raise RuntimeError("a held input's request was not recorded")
        raise InputHeld(request_id)


async def emit_held_input(
    session: Session, run: EngineRun, message: str
) -> tuple[Any, dict[str, Any] | None]:
    """``input`` for a message the runner holds: the content the run goes on with, or why it
    is blocked; ``InputHeld`` while its request waits for a human."""
    return await emit_input(
        session, message, _HeldSlot(point_slot(run, "input", "held", {"content": message}))
    )


class _NeedsReview(Exception):
    """The input waits for a human: only the graph can pause for one."""


class _ReviewInGraph:
    """The approval slot of the runner's ``input``: it has no human answer and cannot pause, so
    a liftable deny withdraws the emission (``Session.emit`` calls ``suspend``) and the graph
    asks again."""

    def __init__(self) -> None:
        self.awaiting_human = False
        self.failed = False

    async def resolve(self, request: ApprovalRequest, /) -> ApprovalResolution:
        self.awaiting_human = True
        return ApprovalResolution(
            outcome=ApprovalOutcome.UNRESOLVED, context_identity=request.context_identity
        )

    def suspend(self, context: dict[str, Any]) -> NoReturn:
        raise _NeedsReview


@dataclass(frozen=True, kw_only=True, slots=True)
class Admission:
    """What governing a new message decided: the run is ``blocked`` (the graph is not
    invoked), or the graph is invoked with ``state``."""

    blocked: dict[str, Any] | None = None
    state: dict[str, Any] | None = None
    #: The message as the run keeps it (``None`` when it is kept nowhere).
    message: str | None = None
    #: A human must read the message and the graph cannot pause for that: the runner holds it.
    held: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class InputGate:
    """How a graph built by ``build_agent`` governs a new message before it runs."""

    graph: str
    governance: Governance
    tools: tuple[str, ...]
    #: The graph's own input keys a run's input may carry beside its message (``None``: the
    #: input is exactly ``{"message": ...}``, as a ``build_agent`` graph takes it).
    input_fields: tuple[str, ...] | None = None
    #: The graph has a ``context_schema``: a run's input may carry its ``context``.
    takes_context: bool = False

    def state_for(self, messages: list[Any], *, new_input: bool = False) -> dict[str, Any]:
        """A held input's graph state: only a host graph's input is ever held (a
        ``build_agent`` graph's ``start`` node pauses for its own)."""
        raise TypeError(f"the graph {self.graph!r} does not take a held input")

    async def admit(
        self, holder: SessionHolder, *, run_id: str, principal: str, message: str
    ) -> Admission:
        """Emit ``agent_startup`` and ``input`` through the run's session (made in ``holder``,
        where the graph's nodes find it) and say how the run goes on."""
        session = holder.get(self.governance, graph=self.graph, run_id=run_id, principal=principal)
        base = {"run_id": run_id, "started_by": principal, "blocked": None}
        blocked = await emit_startup(session, self.tools)
        if blocked is not None:
            return Admission(blocked=blocked)
        try:
            content, blocked = await emit_input(session, message, _ReviewInGraph())
        except _NeedsReview:
            # The graph's start node governs it (agent_startup is not emitted twice).
            state = {
                **base,
                "messages": [HumanMessage(content=message)],
                "new_input": True,
                "startup_emitted": True,
            }
            return Admission(state=state, message=message)
        if blocked is not None:
            return Admission(blocked=blocked)
        state = {**base, "messages": [HumanMessage(content=content)], "new_input": False}
        return Admission(state=state, message=content if isinstance(content, str) else None)


_GATES: weakref.WeakKeyDictionary[Pregel[Any, Any, Any, Any], InputGate] = (
    weakref.WeakKeyDictionary()
)


def register_gate(graph: Pregel[Any, Any, Any, Any], gate: InputGate) -> None:
    _GATES[graph] = gate


def input_gate(graph: Pregel[Any, Any, Any, Any]) -> InputGate | None:
    """The input gate of a graph built by ``build_agent``; ``None`` for any other graph (its
    input goes to it as given)."""
    return _GATES.get(graph)
