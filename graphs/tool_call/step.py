"""The governed tool step: validate, emit ``pre_tool_call``, pause for a human, execute once.

Everything before ``interrupt()`` re-runs when the thread resumes, so it is pure or idempotent:
the emission is recomputed, the pending record is an upsert keyed by (run, call, identity).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from agent_hooks import AgentHooksCoreError, EmitOutcome, InterceptionBlocked
from langchain_core.messages import ToolMessage
from pydantic import BaseModel, ValidationError

from approvals.identity import call_identity, idempotency_key
from approvals.model import DecisionRecord
from approvals.ports import NewRequest
from graphs.hooks.approval import EDITED_BY_APPROVER, ApprovalSlot, DeferredSlot, human_answer
from graphs.hooks.governance import Session
from graphs.tool_call.call import first_failure
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.edits import EditRecheckSlot, tool_extensions
from graphs.tool_call.execution import LedgerExecution, control_error
from graphs.tool_call.tools import GovernedTool, ToolCall

__all__ = ["MAX_EDIT_ROUNDS", "ToolStep", "TransformNotApplicable", "control_error"]


#: How many times in a row approvers may edit one call's arguments before it is refused.
MAX_EDIT_ROUNDS = 8


def _approved_identity(slot: ApprovalSlot) -> str | None:
    """The identity of the stored request a human approved in this emission, if one did."""
    request, decision = getattr(slot, "request", None), getattr(slot, "decision", None)
    if request is None or decision is None or not decision.approved:
        return None
    identity: str = request.identity
    return identity


def _denied(
    call_id: str,
    tool: str,
    blocked: InterceptionBlocked,
    decision: DecisionRecord | None,
    *,
    edited_by: DecisionRecord | None = None,
) -> ToolMessage:
    verdict = blocked.result.verdict
    answer = human_answer(verdict, decision)
    if answer is not None:
        # A human answered in the tool's place (``respond``): the answer is the tool's result,
        # a success, as HumanInTheLoopMiddleware gives it. The tool did not run, so the ledger
        # holds nothing for the call; the decision and its audit event record the answer.
        return ToolMessage(
            content=json.dumps(answer), tool_call_id=call_id, name=tool, status="success"
        )
    return control_error(
        call_id,
        tool,
        {
            "code": verdict.reason or "denied",
            "message": verdict.message or "the call was not allowed",
            **({"decided_by": decision.principal} if decision is not None else {}),
            **({"edited_by": edited_by.principal} if edited_by is not None else {}),
        },
    )


def _note(decided: list[DecisionRecord] | None, slot: ApprovalSlot) -> None:
    decision = getattr(slot, "decision", None)
    if decided is not None and isinstance(decision, DecisionRecord):
        decided.append(decision)


class TransformNotApplicable(RuntimeError):
    """A transform left a value the run cannot go on with: the run fails, visibly."""

    def __init__(self, point: str, tool: str, cause: Exception) -> None:
        super().__init__(f"a transform at {point} of {tool} cannot be applied: {cause}"[:1000])


def _errors_of(exc: Exception) -> list[dict[str, Any]]:
    if isinstance(exc, ValidationError):
        return _validation_errors(exc)
    return [{"path": "", "message": str(exc)}]


def _validation_errors(exc: ValidationError) -> list[dict[str, Any]]:
    return [{"path": "/".join(str(p) for p in e["loc"]), "message": e["msg"]} for e in exc.errors()]


async def _rechecked(
    tool: GovernedTool, call: ToolCall, final_args: Any, edit: BaseModel | None
) -> tuple[BaseModel, dict[str, Any]] | ToolMessage:
    """The arguments a policy's transform (or an approver's edit, already validated) left,
    validated again against the real schema, and the tool's preconditions checked against the
    new values; or the control error that ends the call.

    An edit that went through unchanged keeps its one validation: a validator that rewrites a
    value must not rewrite it twice."""
    try:
        if not isinstance(final_args, dict):
            raise TypeError(f"arguments must be an object, not {type(final_args).__name__}")
        if edit is not None and edit.model_dump(mode="json") == final_args:
            parsed = edit
        else:
            parsed = tool.validate(final_args)
    except (ValidationError, TypeError) as exc:
        # The model's arguments were fine; the policy broke them. That is an
        # enforcement failure: it stops the run instead of misleading the model.
        raise TransformNotApplicable("pre_tool_call", tool.name, exc) from exc
    args = parsed.model_dump(mode="json")
    failed = await first_failure(tool.preconditions, args, call)
    if failed is not None:
        return control_error(
            call.call_id, tool.name, {"code": "precondition_failed", **failed.to_json()}
        )
    return parsed, args


class ToolStep(LedgerExecution):
    """Runs one tool call of one run under governance."""

    def __init__(
        self,
        *,
        graph_name: str,
        tools: Sequence[GovernedTool],
        deps: GraphDeps,
    ) -> None:
        self._graph_name = graph_name
        self._tools = {t.name: t for t in tools}
        self._deps = deps

    async def __call__(
        self,
        *,
        session: Session,
        call: Mapping[str, Any],
        run_id: str,
        thread_id: str,
        principal: str,
        state_version: str | None = None,
        tool_counts: Mapping[str, int] | None = None,
        decided: list[DecisionRecord] | None = None,
    ) -> ToolMessage:
        """``decided``, when given, receives the human decision the call took, if one did."""
        admitted = await self._admit(call, run_id=run_id, principal=principal)
        if isinstance(admitted, ToolMessage):
            return admitted
        tool, parsed, args, tool_call, identity = admitted
        call_id, name = tool_call.call_id, tool.name
        shown = self._shown(tool, tool_call, args, identity, thread_id, state_version)
        slot = DeferredSlot(lambda: self._deps.slot(shown()))
        extensions = tool_extensions(tool, dict(tool_counts or {}))
        ctx = session.context(
            "pre_tool_call", extensions=extensions, call_id=call_id, name=name, args=args
        )
        try:
            outcome = await session.emit(ctx, slot)
        except InterceptionBlocked as blocked:
            _note(decided, slot)
            return _denied(call_id, name, blocked, getattr(slot, "decision", None))
        _note(decided, slot)
        settled = await self._settle_edits(
            session, tool, tool_call, shown, extensions, slot, outcome
        )
        if isinstance(settled, ToolMessage):
            return settled
        final_args, approved, edit = settled
        if final_args != args:
            rechecked = await _rechecked(tool, tool_call, final_args, edit)
            if isinstance(rechecked, ToolMessage):
                return rechecked
            parsed, args = rechecked
            identity = call_identity(run_id=run_id, call_id=call_id, tool=name, args=args)
        if approved is not None and approved != call_identity(
            run_id=run_id, call_id=call_id, tool=name, args=final_args
        ):
            # What runs must be what a human approved. Nothing the engine does gets here; a
            # policy or store that changed the call between approval and execution does.
            return control_error(
                call_id,
                name,
                {
                    "code": "approval_mismatch",
                    "message": "the arguments about to run are not the ones approved; "
                    "the call was not run",
                },
            )
        message = await self.execute_once(
            tool, parsed, args, identity, tool_call, (thread_id, state_version)
        )
        return await self._after(session, message, tool, call_id, args)

    async def _admit(
        self, call: Mapping[str, Any], *, run_id: str, principal: str
    ) -> tuple[GovernedTool, BaseModel, dict[str, Any], ToolCall, str] | ToolMessage:
        """The call's tool, its arguments as validated (and as JSON), the call and its content
        identity; or the control error that refuses it before anyone is asked."""
        call_id = str(call["id"])
        name = str(call["name"])
        tool = self._tools.get(name)
        if tool is None:
            return control_error(
                call_id, name, {"code": "unknown_tool", "message": f"no tool {name!r}"}
            )
        # Validation comes before any human is asked.
        try:
            parsed = tool.validate(call.get("args") or {})
        except ValidationError as exc:
            return control_error(
                call_id,
                name,
                {"code": "invalid_arguments", "errors": _validation_errors(exc)},
            )
        args = parsed.model_dump(mode="json")
        tool_call = ToolCall(
            run_id=run_id,
            call_id=call_id,
            tool=name,
            idempotency_key=idempotency_key(run_id=run_id, call_id=call_id),
            principal=principal,
        )
        # So do the tool's preconditions: a call that cannot run is no question for a human.
        failed = await first_failure(tool.preconditions, args, tool_call)
        if failed is not None:
            return control_error(call_id, name, {"code": "precondition_failed", **failed.to_json()})
        try:
            identity = call_identity(run_id=run_id, call_id=call_id, tool=name, args=args)
        except AgentHooksCoreError as exc:
            # Arguments outside the I-JSON domain (§4.4) have no identity: no human can be
            # asked about them and no decision bound to them. (With the default identity
            # provider the emitter already denied them at post_model_call.)
            return control_error(call_id, name, {"code": "context_invalid", "message": str(exc)})
        return tool, parsed, args, tool_call, identity

    def _shown(
        self,
        tool: GovernedTool,
        call: ToolCall,
        args: dict[str, Any],
        identity: str,
        thread_id: str,
        state_version: str | None,
    ) -> Callable[[], NewRequest]:
        """What the approver will be shown, bound by its identity; made and recorded
        (idempotently) only if a policy escalates the call."""

        def shown() -> NewRequest:
            return NewRequest(
                run_id=call.run_id,
                thread_id=thread_id,
                call_id=call.call_id,
                tool=tool.name,
                shown={"tool": tool.name, "description": tool.description, "args": args},
                args_schema=tool.args_schema(),
                identity=identity,
                reason=None,
                requested_by=call.principal,
                expires_at=datetime.now(UTC) + self._deps.request_ttl,
                state_version=state_version,
            )

        return shown

    async def _settle_edits(
        self,
        session: Session,
        tool: GovernedTool,
        call: ToolCall,
        shown: Callable[[], NewRequest],
        extensions: dict[str, Any],
        slot: ApprovalSlot,
        outcome: EmitOutcome,
    ) -> tuple[Any, str | None, BaseModel | None] | ToolMessage:
        """The arguments to run, the identity a human approved for them (``None``: nobody
        was asked) and the last edit as validated, after every approver's edit went through
        ``pre_tool_call`` again; or the control error that ends the call.

        An edit is a new call: a deny refuses it, an escalation to the approvers who decided is
        satisfied by their decision, and one to other or more approvers is a new request (for
        the edited arguments, which the editor may not decide) that pauses the run again."""
        name = tool.name
        target, approved = outcome.target, _approved_identity(slot)
        validated: BaseModel | None = None
        for _ in range(MAX_EDIT_ROUNDS):
            decided, decision = getattr(slot, "request", None), getattr(slot, "decision", None)
            if outcome.record.verdict.reason != EDITED_BY_APPROVER:
                return target, approved, validated
            if decided is None or decision is None:
                raise AssertionError("an approver's edit without its request and decision")
            try:
                if not isinstance(target, dict):
                    raise TypeError(f"arguments must be an object, not {type(target).__name__}")
                validated = tool.validate(target)
                edited = validated.model_dump(mode="json")
            except (ValidationError, TypeError) as exc:
                return control_error(
                    call.call_id, name, {"code": "invalid_arguments", "errors": _errors_of(exc)}
                )
            failed = await first_failure(tool.preconditions, edited, call)
            if failed is not None:
                return control_error(
                    call.call_id, name, {"code": "precondition_failed", **failed.to_json()}
                )
            identity = call_identity(
                run_id=call.run_id, call_id=call.call_id, tool=name, args=edited
            )
            base = shown()
            proposal = dataclasses.replace(
                base,
                shown={**base.shown, "args": edited},
                identity=identity,
                proposed_by=decision.principal,
                expires_at=datetime.now(UTC) + self._deps.request_ttl,
            )
            slot = EditRecheckSlot(self._deps.slot(proposal), decided)
            ctx = session.context(
                "pre_tool_call", extensions=extensions, call_id=call.call_id, name=name, args=edited
            )
            try:
                outcome = await session.emit(ctx, slot)
            except InterceptionBlocked as blocked:
                return _denied(call.call_id, name, blocked, slot.decision, edited_by=decision)
            target = outcome.target
            asked = _approved_identity(slot) if not slot.covered else None
            approved = asked or identity
            if asked is None and target != edited:
                return control_error(
                    call.call_id,
                    name,
                    {
                        "code": "edit_rewritten",
                        "message": "a policy rewrites the edited arguments, so nobody approved "
                        "what would run; the call was not run",
                        "edited_by": decision.principal,
                    },
                )
        return control_error(
            call.call_id,
            name,
            {"code": "too_many_edits", "message": f"edited more than {MAX_EDIT_ROUNDS} times"},
        )

    async def _after(
        self,
        session: Session,
        message: ToolMessage,
        tool: GovernedTool,
        call_id: str,
        args: dict[str, Any],
    ) -> ToolMessage:
        """``post_tool_call``: the result reaches the model only as the policies leave it, and
        not at all when they deny it."""
        value = json.loads(str(message.content))
        is_error = message.status == "error"
        name = tool.name
        ctx = session.context(
            "post_tool_call",
            extensions={"tool": tool.describe_for_policy()},
            call_id=call_id,
            name=name,
            args=args,
            value=value,
            is_error=is_error,
        )
        try:
            await session.emit(ctx)
        except InterceptionBlocked as blocked:
            verdict = blocked.result.verdict
            return control_error(
                call_id,
                name,
                {
                    "code": verdict.reason or "denied",
                    "message": verdict.message or "the result was withheld",
                },
            )
        released = ctx["tool_result"]["value"]
        if released == value:
            return message
        return ToolMessage(
            content=json.dumps(released, sort_keys=True),
            tool_call_id=call_id,
            name=name,
            status="error" if is_error else "success",
        )
