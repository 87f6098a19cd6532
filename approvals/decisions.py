"""Deciding a pending call: validate what the decider sent, then consume the request once.

Identity (``principal``) always comes from the caller's authenticated context, never from
the decision body. Edited arguments are validated here against the schema recorded with the
request, and their content identity is bound to the decision.
"""

from __future__ import annotations

import uuid
from typing import Any

import jsonschema

from approvals.errors import (
    EditedArgumentsInvalid,
    InvalidDecision,
    InvalidRequestId,
    RequestNotFound,
)
from approvals.identity import call_identity
from approvals.model import Decision, DecisionKind, Verdict, Vote
from approvals.ports import ApprovalRequests, Decisions

MAX_REASON_LENGTH = 2000


def parse_request_id(value: str) -> str:
    """Return the canonical form of a request id, or raise ``InvalidRequestId``.

    Request ids are random UUIDs; anything else was not issued by the engine.
    """
    try:
        parsed = uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        raise InvalidRequestId(str(value)) from None
    if parsed.version != 4 or str(parsed) != value:
        raise InvalidRequestId(value)
    return str(parsed)


def _schema_errors(schema: dict[str, Any], args: dict[str, Any]) -> list[dict[str, Any]]:
    validator = jsonschema.Draft202012Validator(schema)
    return [
        {"path": "/".join(str(p) for p in err.absolute_path), "message": err.message}
        for err in sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path))
    ]


async def decide(
    requests: ApprovalRequests,
    decisions: Decisions,
    request_id: str,
    verdict: Verdict | str,
    *,
    principal: str,
    reason: str | None = None,
    args: dict[str, Any] | None = None,
) -> Decision | Vote:
    """Decide one pending call as ``principal``.

    Raises ``InvalidRequestId`` (malformed), ``RequestNotFound`` (unknown),
    ``RequestNotPending`` (decided, expired or superseded; also when another decider won a
    race), ``InvalidDecision`` or ``EditedArgumentsInvalid``.
    """
    canonical = parse_request_id(request_id)
    try:
        verdict = Verdict(verdict)
    except ValueError:
        raise InvalidDecision(
            canonical, f"decision must be approve or reject, not {verdict!r}"
        ) from None
    if not principal or not principal.strip():
        raise InvalidDecision(canonical, "a decision needs an authenticated principal")
    if reason is not None and len(reason) > MAX_REASON_LENGTH:
        raise InvalidDecision(canonical, f"reason is longer than {MAX_REASON_LENGTH} characters")
    if verdict is Verdict.REJECT and args is not None:
        raise InvalidDecision(canonical, "edited arguments only go with approve")
    if verdict is Verdict.REJECT and not (reason and reason.strip()):
        raise InvalidDecision(canonical, "a rejection needs a reason")
    if args is not None and not isinstance(args, dict):
        raise InvalidDecision(canonical, "edited arguments must be a JSON object")

    kind = DecisionKind(verdict.value)
    args_identity = None
    if args is not None:
        # Edits are validated against the schema recorded with the request.
        request = await requests.get(canonical)
        if request is None:
            raise RequestNotFound(canonical)
        if not request.allow_edit and args != request.shown.get("args"):
            raise InvalidDecision(
                canonical, "this request cannot be edited, only approved or rejected"
            )
        errors = _schema_errors(request.args_schema, args)
        if errors:
            raise EditedArgumentsInvalid(canonical, errors)
        if args != request.shown.get("args"):
            kind = DecisionKind.EDIT
        args_identity = call_identity(
            run_id=request.run_id, call_id=request.call_id, tool=request.tool, args=args
        )
    return await decisions.decide(
        canonical,
        kind=kind,
        principal=principal.strip(),
        reason=reason,
        args=args if kind is DecisionKind.EDIT else None,
        args_identity=args_identity if kind is DecisionKind.EDIT else None,
    )
