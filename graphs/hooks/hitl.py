"""``HumanInTheLoopMiddleware``'s vocabulary, spoken by the engine: the interrupt payloads a HITL
client reads (``HITLRequest`` in batched mode, ``ToolApprovalRequest`` per call) and its
decisions (``approve``, ``edit``, ``reject``, ``respond``) as the engine's rulings.

Every pending call the engine pauses on carries a HITL-shaped payload, whether the engine runs
the graph or the application does, with the engine's own fields as extra keys: the request id,
the content identity the decision is bound to, the expiry and the digest of the shown copy.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from langchain.agents.middleware.human_in_the_loop import _decision_schema
from pydantic import TypeAdapter

from approvals.model import DECISION_TYPES, DecisionKind, DecisionRecord, PendingCall, Ruling
from approvals.model import NO_REASON as _NO_REASON

InterruptMode = Literal["batched", "per_call"]
INTERRUPT_MODES: tuple[InterruptMode, ...] = ("batched", "per_call")

#: The reason recorded for a ``reject`` that gave no message (``approvals.model.NO_REASON``);
#: read back as no message, so the model gets HITL's default text.
NO_REASON = _NO_REASON

#: How the current call's pause is shaped; set by ``ApprovalMiddleware`` around its tool step.
_MODE: ContextVar[InterruptMode] = ContextVar("approvals_interrupt_mode", default="per_call")


@contextmanager
def interrupt_mode(mode: InterruptMode) -> Iterator[None]:
    """Within this block, a pause is shaped as ``mode`` says (``payload``)."""
    token = _MODE.set(mode)
    try:
        yield
    finally:
        _MODE.reset(token)


def engine_fields(request: PendingCall) -> dict[str, Any]:
    """The engine's own keys beside HITL's: what a client needs to decide through the engine."""
    return {
        "request_id": request.id,
        "call_id": request.call_id,
        "tool": request.tool,
        "identity": request.identity,
        "expires_at": request.expires_at.isoformat(),
        "shown_digest": request.current_shown_digest(),
        "allowed_decisions": list(request.offered_decisions),
    }


def description_of(request: PendingCall) -> str:
    """What the reviewer is told about the call: the escalation's reason, or the tool's own
    description."""
    return str(request.reason or request.shown.get("description") or request.tool)


def payload(request: PendingCall, mode: InterruptMode | None = None) -> dict[str, Any]:
    """The interrupt value for ``request``: a ``ToolApprovalRequest`` per call, or a
    ``HITLRequest`` of this one action in batched mode, with the engine's fields. The
    arguments are the shown copy (redaction applied), never more than the approver sees."""
    args = request.shown.get("args")
    shown_args = dict(args) if isinstance(args, Mapping) else {}
    description = description_of(request)
    if (mode or _MODE.get()) == "batched":
        hitl: dict[str, Any] = {
            "action_requests": [
                {"name": request.tool, "args": shown_args, "description": description}
            ],
            "review_configs": [
                {"action_name": request.tool, "allowed_decisions": list(request.offered_decisions)}
            ],
        }
    else:
        hitl = {
            "type": "tool_approval",
            "tool_call_id": request.call_id,
            "name": request.tool,
            "args": shown_args,
            "description": description,
        }
    return {**hitl, **engine_fields(request)}


def response_schema(request: PendingCall) -> dict[str, Any]:
    """The JSON schema of the HITL decisions ``request`` offers (HITL's per-call
    ``response_schema``), an edit's arguments as the request's own schema records them."""
    allowed = [d for d in request.offered_decisions if d in DECISION_TYPES]
    schema = TypeAdapter(_decision_schema(allowed or ["reject"], request.tool)).json_schema()  # type: ignore[arg-type]
    defs = schema.get("$defs")
    if isinstance(defs, dict) and "EditedAction" in defs:
        defs["EditedAction"]["properties"]["args"] = request.args_schema or {"type": "object"}
    return schema


@dataclass(frozen=True, kw_only=True, slots=True)
class Ruled:
    """A HITL decision in the engine's terms (``approvals.decisions.decide``'s arguments)."""

    ruling: Ruling
    reason: str | None = None
    args: dict[str, Any] | None = None
    message: str | None = None
    #: An edit that names another tool (HITL lets a reviewer redirect a call).
    tool: str | None = None


class InvalidHitlDecision(ValueError):
    """A resume value that is no HITL decision (``Decision``) for the call."""


def ruled(decision: Any, tool: str) -> Ruled:
    """``decision`` (a HITL ``Decision`` mapping) as a ruling; ``InvalidHitlDecision`` for
    anything else."""
    if not isinstance(decision, Mapping):
        raise InvalidHitlDecision(f"a decision must be a mapping, not {type(decision).__name__}")
    kind = decision.get("type")
    message = decision.get("message")
    if message is not None and not isinstance(message, str):
        raise InvalidHitlDecision("a decision's message must be a string")
    if kind == "approve":
        return Ruled(ruling=Ruling.APPROVE)
    if kind == "reject":
        return Ruled(ruling=Ruling.REJECT, reason=message if message else NO_REASON)
    if kind == "respond":
        if not message:
            raise InvalidHitlDecision("a respond decision needs a non-empty message")
        return Ruled(ruling=Ruling.RESPOND, message=message)
    if kind == "edit":
        action = decision.get("edited_action")
        if not isinstance(action, Mapping) or not isinstance(action.get("args"), Mapping):
            raise InvalidHitlDecision("an edit decision needs edited_action with name and args")
        name = action.get("name", tool)
        if not isinstance(name, str) or not name:
            raise InvalidHitlDecision("an edit decision's edited_action.name must be a tool name")
        return Ruled(
            ruling=Ruling.APPROVE, args=dict(action["args"]), tool=None if name == tool else name
        )
    raise InvalidHitlDecision(
        f"unknown decision type {kind!r}: expected approve, edit, reject or respond"
    )


def as_hitl(record: DecisionRecord, tool: str) -> dict[str, Any]:
    """A stored decision as the HITL ``Decision`` it stands for (what the model is told
    follows the stored decision, never a racing resume's)."""
    if record.kind is DecisionKind.EDIT and record.args is not None:
        return {"type": "edit", "edited_action": {"name": tool, "args": record.args}}
    if record.kind is DecisionKind.REJECT:
        reason = record.reason
        return (
            {"type": "reject"}
            if reason in (None, NO_REASON)
            else {
                "type": "reject",
                "message": reason,
            }
        )
    if record.kind is DecisionKind.RESPOND:
        return {"type": "respond", "message": record.reason or ""}
    return {"type": "approve"}
