"""Deciding a pending call: validate what the decider sent, then consume the request once.

Identity (``principal``) always comes from the caller's authenticated context, never from
the decision body. Edited arguments are validated here against the schema recorded with the
request, and their content identity is bound to the decision.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

import jsonschema

from approvals.errors import (
    EditedArgumentsInvalid,
    EditRefused,
    InvalidDecision,
    InvalidRequestId,
    RequestNotFound,
    ShownCopyChanged,
)
from approvals.identity import call_identity
from approvals.json_values import check_inputs
from approvals.model import ApprovalRequest, Decision, DecisionKind, Verdict, Vote
from approvals.ports import ApprovalRequests, Decisions
from approvals.redaction import check_edit, visible_errors

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


class EditRecheck(Protocol):
    """Checks an approver's edited arguments against the policy of the run they belong to.

    Returns the arguments as the tool parses them (what will run); raises ``EditRefused`` when
    the policy denies or would rewrite them, ``EditedArgumentsInvalid`` when the tool refuses
    them."""

    async def __call__(
        self, request: ApprovalRequest, args: dict[str, Any], /
    ) -> dict[str, Any]: ...


async def decide(
    requests: ApprovalRequests,
    decisions: Decisions,
    request_id: str,
    verdict: Verdict | str,
    *,
    principal: str,
    reason: str | None = None,
    args: dict[str, Any] | None = None,
    recheck: EditRecheck | None = None,
) -> Decision | Vote:
    """Decide one pending call as ``principal``.

    Edited arguments go through ``recheck`` (the policy, again) before anything is consumed;
    without one, edits are refused. A request whose shown copy no longer matches its digest is
    refused (``ShownCopyChanged``) and the refusal recorded.

    Raises ``InvalidRequestId`` (malformed), ``RequestNotFound`` (unknown),
    ``RequestNotPending`` (decided, expired or superseded; also when another decider won a
    race), ``InvalidDecision`` or ``EditedArgumentsInvalid``.
    """
    canonical = parse_request_id(request_id)
    # Refused here, before anything is read or written: text PostgreSQL cannot store, NaN,
    # nesting that would exhaust the schema validator (InvalidValue names the field).
    check_inputs(reason=reason, args=args, principal=principal)
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
    request = await requests.get(canonical)
    if request is None:
        raise RequestNotFound(canonical)
    if not request.shown_intact:
        # What the decider was shown is not what was recorded: no decision can be bound to it.
        await requests.record_tampered(request, principal=principal.strip())
        raise ShownCopyChanged(canonical)
    if args is not None:
        # Edits are validated against the schema recorded with the request.
        if not request.allow_edit and args != request.shown.get("args"):
            raise InvalidDecision(
                canonical, "this request cannot be edited, only approved or rejected"
            )
        # A redacted argument cannot be edited; its marker's schema errors are not the
        # approver's to fix (the original value is restored and validated before it runs).
        check_edit(canonical, args, request.shown)
        errors = visible_errors(_schema_errors(request.args_schema, args), request.shown)
        if errors:
            raise EditedArgumentsInvalid(canonical, errors)
        if args != request.shown.get("args"):
            if request.quorum > 1:
                raise InvalidDecision(
                    canonical,
                    f"this request needs {request.quorum} approvers, so its arguments cannot "
                    "be edited; approve or reject them as shown",
                )
            if recheck is None:
                # An edit can change what a call does; without the policy to check it against,
                # it is refused rather than run on the editor's word alone.
                raise EditRefused(canonical, None, "edits cannot be checked here")
            args = await recheck(request, args)
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
