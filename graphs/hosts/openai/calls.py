"""The governed calls of one OpenAI Agents SDK run: the engine's answer for each call (the
gate: allowed, paused on its request, or denied), the SDK's two tool callbacks that ask it
(``needs_approval`` and ``on_invoke_tool``), and the one execution of an allowed call through
the ledger.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NoReturn

from agent_hooks import AgentHooksCoreError, InterceptionBlocked
from agents import FunctionTool, RunContextWrapper
from agents.tool_context import ToolContext
from agents.util._approvals import evaluate_needs_approval_setting

from approvals.decisions import schema_errors
from approvals.identity import call_identity, idempotency_key
from approvals.model import DecisionRecord, ExecutionStatus, PendingCall
from approvals.ports import NewRequest
from approvals.tracing import run_span
from graphs.hooks.approval import EDITED_BY_APPROVER, ApprovalSlot, human_answer
from graphs.hooks.governance import Session
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.storable import storable, storable_text
from graphs.tool_call.tools import ToolCall

#: The decisions an OpenAI-SDK call offers: the SDK can approve or reject a call, not edit it.
OFFERED = ("approve", "reject")


class _AwaitingHuman(Exception):
    def __init__(self, request: PendingCall) -> None:
        super().__init__(request.id)
        self.request = request


class _HostSlot:
    """The engine's approval slot for a call, but pausing the SDK's way: instead of
    ``interrupt()``, ``needs_approval`` answers yes."""

    def __init__(self, inner: ApprovalSlot) -> None:
        self._inner = inner

    @property
    def awaiting_human(self) -> bool:
        return self._inner.awaiting_human

    @property
    def failed(self) -> bool:
        return self._inner.failed

    @property
    def request(self) -> PendingCall | None:
        found: PendingCall | None = getattr(self._inner, "request", None)
        return found

    @property
    def decision(self) -> DecisionRecord | None:
        found: DecisionRecord | None = getattr(self._inner, "decision", None)
        return found

    async def resolve(self, request: Any, /) -> Any:
        return await self._inner.resolve(request)

    def suspend(self, context: dict[str, Any]) -> NoReturn:
        assert self.request is not None
        raise _AwaitingHuman(self.request)


@dataclass(frozen=True, kw_only=True, slots=True)
class Gate:
    """What the engine answers for one call: run it with ``args``, pause, or answer the model
    with ``message`` instead."""

    args: dict[str, Any] | None = None
    pending: PendingCall | None = None
    message: str | None = None


@dataclass(kw_only=True)
class HostRun:
    """One invocation of one OpenAI-SDK run: what the governed tools serve."""

    run_id: str
    thread_id: str
    principal: str
    agent_name: str
    deps: GraphDeps
    session: Session
    #: The request each call that paused in this invocation recorded, and the call's identity,
    #: by its scoped call id (``scoped_call_id``).
    requests: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: ``run.tool_count`` for policies, per tool: the run's successful executions, from the
    #: ledger at the start of this invocation (each resume is a new one) and counted on since.
    #: The SDK gates a turn's calls together, in no order a resume keeps: a call does not
    #: count the ones beside it in its turn (docs/openai-agents.md).
    counts: dict[str, int] = field(default_factory=dict)
    #: The answer for each (call id, identity) this invocation settled (not a pause).
    settled: dict[tuple[str, str], Gate] = field(default_factory=dict)

    async def gate(
        self, tool: FunctionTool, call_id: str, args: dict[str, Any], needs: Needs
    ) -> Gate:
        """``pre_tool_call`` for a call (``call_id`` scoped, ``scoped_call_id``): allowed
        (maybe transformed), paused on its request, or denied (by a policy or a human).

        The SDK asks ``needs_approval`` and then ``on_invoke_tool`` about the same call in
        one invocation: that is one interception, so it is emitted (and recorded) once and
        its answer kept for the same arguments. A pause is never kept: a resume asks again,
        and the answer comes from the database.

        ``needs`` (the tool's own ``needs_approval``) is asked only of arguments the schema
        takes: a predicate that still fails on them answers the model ``invalid_arguments``
        and runs nothing."""
        # Arguments the tool's schema refuses never reach a policy: the SDK would convert them
        # to the tool's types only to run it ("false" for a boolean runs as False), so a
        # policy, the request and its identity would judge other values than those that run.
        errors = schema_errors(tool.params_json_schema, args)
        if errors:
            return Gate(message=_error("invalid_arguments", "the tool refuses them", errors=errors))
        try:
            identity = call_identity(run_id=self.run_id, call_id=call_id, tool=tool.name, args=args)
        except AgentHooksCoreError as exc:
            return Gate(message=_error("context_invalid", str(exc)))
        key = (call_id, identity)
        kept = self.settled.get(key)
        if kept is not None:
            return kept
        try:
            needed = await needs()
        except Exception as exc:  # the tool's own predicate, on arguments it cannot judge
            answer = Gate(
                message=_error(
                    "invalid_arguments",
                    "the tool's needs_approval could not judge them: "
                    + storable_text(f"{type(exc).__name__}: {exc}"[:300]),
                )
            )
            self.settled[key] = answer
            return answer
        answer = await self._pre_tool_call(tool, call_id, args, needed, identity)
        if answer.pending is None:
            self.settled[key] = answer
        return answer

    async def record_rejection(
        self, tool: FunctionTool, call_id: str, args: dict[str, Any]
    ) -> None:
        """Emit the ``pre_tool_call`` of a call a human rejected (or that expired), answered
        by the stored decision. The SDK is told ``state.reject`` and never asks about the call
        again, so without this the rejection would leave no interception record."""
        invoke = tool.on_invoke_tool
        own = invoke.needs if isinstance(invoke, GovernedInvoke) else tool.needs_approval

        async def escalated() -> bool:
            # By its own needs_approval, or by a policy that comes first anyway.
            return own is not False

        await self.gate(tool, call_id, args, escalated)

    async def _pre_tool_call(
        self, tool: FunctionTool, call_id: str, args: dict[str, Any], needs: bool, identity: str
    ) -> Gate:
        name = tool.name
        new = NewRequest(
            run_id=self.run_id,
            thread_id=self.thread_id,
            call_id=call_id,
            tool=name,
            shown={"tool": name, "description": tool.description, "args": args},
            args_schema=tool.params_json_schema,
            identity=identity,
            reason=None,
            requested_by=self.principal,
            expires_at=datetime.now(UTC) + self.deps.request_ttl,
            allow_edit=False,
            allowed_decisions=OFFERED,
        )
        slot = _HostSlot(self.deps.slot(new))
        extensions = {
            "tool": {"needs_approval": needs, "sensitive": needs, "agent": self.agent_name},
            "tool_count": self.counts.get(name, 0),
            "tool_counts": dict(self.counts),
        }
        ctx = self.session.context(
            "pre_tool_call", extensions=extensions, call_id=call_id, name=name, args=args
        )
        try:
            outcome = await self.session.emit(ctx, slot)
        except _AwaitingHuman as waiting:
            self.requests[call_id] = (waiting.request.id, identity)
            return Gate(pending=waiting.request)
        except InterceptionBlocked as blocked:
            return Gate(message=_denied(blocked, slot.decision))
        verdict = outcome.record.verdict
        if verdict.reason == EDITED_BY_APPROVER:
            # Not offered (the requests allow no edit); a decision that says so runs nothing.
            return Gate(message=_error("edit_refused", "edits are not taken for this tool"))
        target = outcome.target
        if not isinstance(target, dict):
            return Gate(message=_error("invalid_arguments", "arguments must be an object"))
        approved = slot.request if slot.decision is not None else None
        if approved is not None and approved.identity != call_identity(
            run_id=self.run_id, call_id=call_id, tool=name, args=target
        ):
            return Gate(
                message=_error(
                    "approval_mismatch",
                    "the arguments about to run are not the ones approved; the call was not run",
                )
            )
        return Gate(args=target)

    async def after(
        self, tool: FunctionTool, call_id: str, args: dict[str, Any], result: Any
    ) -> Any:
        """``post_tool_call``: the result reaches the model only as the policies leave it
        (masked by a transform, withheld by a deny). The ledger keeps what the tool returned."""
        value = _storable(result)
        ctx = self.session.context(
            "post_tool_call",
            extensions={"tool": {"agent": self.agent_name}},
            call_id=call_id,
            name=tool.name,
            args=args,
            value=value,
            is_error=isinstance(value, str) and value.startswith('{"error"'),
        )
        try:
            await self.session.emit(ctx)
        except InterceptionBlocked as blocked:
            verdict = blocked.result.verdict
            return _error(verdict.reason or "denied", verdict.message or "the result was withheld")
        released = ctx["tool_result"]["value"]
        return result if released == value else released

    async def execute_once(
        self,
        tool: FunctionTool,
        call_id: str,
        args: dict[str, Any],
        run: Callable[[], Awaitable[Any]],
    ) -> Any:
        """Run the call at most once for (run, call id), as the ledger records it."""
        ledger = self.deps.ledger
        key = idempotency_key(run_id=self.run_id, call_id=call_id)
        identity = call_identity(run_id=self.run_id, call_id=call_id, tool=tool.name, args=args)
        owned, row = await ledger.begin(
            run_id=self.run_id, call_id=call_id, tool=tool.name, key=key, args_identity=identity
        )
        if not owned and row.args_identity != identity:
            return _error(
                "call_id_reused",
                f"call id {call_id!r} already ran with other arguments in this run; this "
                "call did not run",
            )
        if not owned:
            if row.status is ExecutionStatus.STARTED:
                # Started and never finished: the process died mid-call. Whether it took
                # effect is unknown, so it is never run again.
                row = await ledger.finish(
                    run_id=self.run_id, call_id=call_id, status=ExecutionStatus.OUTCOME_UNKNOWN
                )
            if row.status is ExecutionStatus.SUCCEEDED:
                return row.result
            if row.status is ExecutionStatus.FAILED:
                return _error("tool_failed", row.error or "the tool failed")
            return _error(
                "outcome_unknown",
                "the call started earlier and its outcome was never recorded; it was not run "
                "again, and an operator must say whether it took effect",
            )
        token = _CURRENT_CALL.set(
            ToolCall(
                run_id=self.run_id,
                call_id=call_id,
                tool=tool.name,
                idempotency_key=key,
                principal=self.principal,
            )
        )
        try:
            with run_span("approvals.tool", self.run_id, tool=tool.name, call_id=call_id):
                result = await run()
        except Exception as exc:  # the tool's own failure is reported to the model
            message = storable_text(f"{type(exc).__name__}: {exc}"[:500])
            await ledger.finish(
                run_id=self.run_id, call_id=call_id, status=ExecutionStatus.FAILED, error=message
            )
            return _error("tool_failed", message)
        finally:
            _CURRENT_CALL.reset(token)
        # The ledger keeps what the tool returned, and the model is given the same: a NUL or
        # a lone surrogate (which PostgreSQL cannot store) as a visible escape.
        kept = _storable(result)
        await ledger.finish(
            run_id=self.run_id,
            call_id=call_id,
            status=ExecutionStatus.SUCCEEDED,
            result=kept,
        )
        self.counts[tool.name] = self.counts.get(tool.name, 0) + 1
        return result if kept == result else kept


#: What the SDK's ``needs_approval`` setting of a tool answers for a call, asked when the gate
#: wants it.
Needs = Callable[[], Awaitable[bool]]

_CURRENT_RUN: ContextVar[HostRun | None] = ContextVar("approvals_openai_run", default=None)
#: The call ids of the ``as_tool`` agent calls a nested call runs inside, outermost first.
_AGENT_PATH: ContextVar[tuple[str, ...]] = ContextVar("approvals_openai_agent_path", default=())

#: What joins an agent path's call ids in a scoped call id.
PATH_SEPARATOR = "/"


def scoped_call_id(call_id: str) -> str:
    """The call id the engine records for the SDK's ``call_id`` here: prefixed with the call
    ids of the ``as_tool`` agent calls it runs inside (``"o1/n1"``), so two nested runs whose
    models both name a call ``n1`` get a request, a ledger row and an identity each. A call of
    the top-level agent keeps its own id. A ``/`` (or ``%``) in a model's own call id is
    escaped (``%2F``, ``%25``), so no call id a model makes up names another call's place."""
    return PATH_SEPARATOR.join(escaped_call_id(c) for c in (*_AGENT_PATH.get(), call_id))


def escaped_call_id(call_id: str) -> str:
    """A model's call id as one part of a scoped call id."""
    return call_id.replace("%", "%25").replace(PATH_SEPARATOR, "%2F")


_CURRENT_CALL: ContextVar[ToolCall | None] = ContextVar("approvals_openai_call", default=None)


def current_call() -> ToolCall:
    """The call a governed OpenAI-SDK tool is executing: its run, call id and idempotency key
    (to pass to the system it changes)."""
    call = _CURRENT_CALL.get()
    if call is None:
        raise RuntimeError("no governed call is executing here")
    return call


def current_run() -> HostRun:
    run = _CURRENT_RUN.get()
    if run is None:
        # Fail closed: a governed tool called outside an engine run must neither run nor be
        # waved through.
        raise RuntimeError("this agent's tools are governed: run it through the engine")
    return run


def enter(run: HostRun) -> Any:
    """Make ``run`` the current one (for the SDK's tool callbacks); returns the reset token."""
    return _CURRENT_RUN.set(run)


def leave(token: Any) -> None:
    _CURRENT_RUN.reset(token)


class GovernedApproval:
    """A tool's ``needs_approval``, answered by the engine."""

    def __init__(self, tool: FunctionTool, own: Any) -> None:
        self._tool = tool
        self._own = own

    async def __call__(
        self, context: RunContextWrapper[Any], params: dict[str, Any], call_id: str
    ) -> bool:
        run = current_run()

        async def needs() -> bool:
            return await evaluate_needs_approval_setting(self._own, context, params, call_id)

        gate = await run.gate(self._tool, scoped_call_id(call_id), params, needs)
        return gate.pending is not None


class GovernedInvoke:
    """A tool's ``on_invoke_tool``: asks the engine again (the decision is read from the
    database), then runs the call once through the ledger."""

    def __init__(
        self, tool: FunctionTool, own: Callable[[ToolContext[Any], str], Any], needs: Any
    ) -> None:
        self._tool = tool
        self._own = own
        self._needs = needs

    @property
    def needs(self) -> Any:
        """The tool's own ``needs_approval`` (a bool, or a function of the call)."""
        return self._needs

    async def __call__(self, context: ToolContext[Any], arguments: str) -> Any:
        run = current_run()
        own_id = context.tool_call_id
        call_id = scoped_call_id(own_id)
        try:
            args = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return _error("invalid_arguments", "the arguments are not JSON")
        if not isinstance(args, dict):
            return _error("invalid_arguments", "the arguments must be a JSON object")

        async def needs() -> bool:
            return await evaluate_needs_approval_setting(self._needs, context, args, own_id)

        gate = await run.gate(self._tool, call_id, args, needs)
        if gate.pending is not None:
            # The RunState says go, the database does not: nothing runs.
            return _error(
                "not_approved",
                f"request {gate.pending.id} has no approval; the call was not run",
            )
        if gate.args is None:
            return gate.message
        final = gate.args

        async def invoke() -> Any:
            return await self._own(context, json.dumps(final))

        if getattr(self._tool, "_is_agent_tool", False):
            # A nested agent: its own function tools go through the ledger one by one, their
            # call ids scoped by this call's; the nested run itself may pause and resume, so
            # it is not a single execution.
            path = _AGENT_PATH.set((*_AGENT_PATH.get(), own_id))  # escaped when joined
            try:
                return await invoke()
            finally:
                _AGENT_PATH.reset(path)
        result = await run.execute_once(self._tool, call_id, final, invoke)
        return await run.after(self._tool, call_id, final, result)


def govern_tool(tool: FunctionTool) -> None:
    """Govern ``tool`` in place: its ``needs_approval`` and ``on_invoke_tool`` ask the engine
    (its own ``needs_approval`` becomes an escalation of the call's ``pre_tool_call``)."""
    own = tool.needs_approval
    tool.needs_approval = GovernedApproval(tool, own)
    tool.on_invoke_tool = GovernedInvoke(tool, tool.on_invoke_tool, own)


def _error(code: str, message: str, **more: Any) -> str:
    return json.dumps({"error": {"code": code, "message": message, **more}}, sort_keys=True)


def _denied(blocked: InterceptionBlocked, decision: DecisionRecord | None) -> str:
    verdict = blocked.result.verdict
    answer = human_answer(verdict, decision)
    if answer is not None:
        return answer
    more = {"decided_by": decision.principal} if decision is not None else {}
    return _error(verdict.reason or "denied", verdict.message or "the call was not allowed", **more)


def _storable(result: Any) -> Any:
    """The result as the ledger keeps it: JSON as it is, anything else as its text, with
    what PostgreSQL cannot store escaped (``storable``)."""
    try:
        json.dumps(result)
    except (TypeError, ValueError):
        return storable_text(str(result))
    return storable(result)
