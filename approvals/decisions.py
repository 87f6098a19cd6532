"""Deciding a pending call: validate what the decider sent, then consume the request once.

Identity (``principal``) always comes from the caller's authenticated context, never from
the decision body. Edited arguments are validated here against the schema recorded with the
request, and their content identity is bound to the decision.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

import jsonschema

from approvals.decision_kinds import KIND_RULES, DecisionKind, Ruling, check_sole_approver, spoken
from approvals.errors import (
    EditedArgumentsInvalid,
    EditRefused,
    InvalidDecision,
    InvalidRequestId,
    RequestNotFound,
    RequestNotPending,
    ShownCopyChanged,
)
from approvals.grants import Offer, StandingGrants
from approvals.identity import call_identity
from approvals.json_values import check_inputs
from approvals.model import NO_REASON, DecisionRecord, PendingCall, Vote
from approvals.ports import ApprovalRequests, Decisions, RequestCheck
from approvals.redaction import check_edit, visible_errors
from approvals.states import RequestStatus
from approvals.tracing import run_span

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


def schema_errors(schema: dict[str, Any], args: dict[str, Any]) -> list[dict[str, Any]]:
    """Where ``args`` break ``schema`` (JSON Schema 2020-12), in path order; none: valid."""
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

    async def __call__(self, request: PendingCall, args: dict[str, Any], /) -> dict[str, Any]: ...


def _check_answer(
    request_id: str, message: str | None, *, reason: str | None, args: dict[str, Any] | None
) -> None:
    """A respond decision carries one non-empty answer, and nothing else."""
    if args is not None:
        raise InvalidDecision(request_id, "edited arguments only go with approve")
    if reason is not None:
        raise InvalidDecision(request_id, "a response carries its answer as message, not reason")
    if not isinstance(message, str) or not message.strip():
        raise InvalidDecision(request_id, "a response needs a non-empty message")
    if len(message) > MAX_REASON_LENGTH:
        raise InvalidDecision(request_id, f"message is longer than {MAX_REASON_LENGTH} characters")


def _check_offered(request_id: str, request: PendingCall, kind: DecisionKind) -> None:
    """Refuse a decision of ``kind`` that ``request`` does not offer (``offered_rules``)."""
    if kind not in request.offered_decisions:
        raise InvalidDecision(request_id, _not_offered(request, KIND_RULES[kind].refused_as))


def _not_offered(request: PendingCall, what: str) -> str:
    offered = ", ".join(request.offered_decisions) or "nothing"
    return f"this request cannot be {what}; it offers: {offered}"


def _still_pending(request_id: str, request: PendingCall) -> None:
    """``RequestNotPending`` for a request read in a final status (what the transaction would
    raise: a status other than pending never changes again)."""
    if request.status is not RequestStatus.PENDING:
        raise RequestNotPending(request_id, request.status.value)


def _checked_verdict(
    request_id: str,
    verdict: Ruling | str,
    *,
    principal: str,
    reason: str | None,
    args: dict[str, Any] | None,
    message: str | None,
    require_reason: bool,
) -> tuple[Ruling, str | None]:
    """The verdict, and the reason to record, of a decision whose parts go together: what
    ``decide`` refuses before it reads the request."""
    try:
        ruling = Ruling(verdict)
    except ValueError:
        raise InvalidDecision(
            request_id, f"decision must be {spoken(Ruling)}, not {verdict!r}"
        ) from None
    if not principal or not principal.strip():
        raise InvalidDecision(request_id, "a decision needs an authenticated principal")
    if reason is not None and len(reason) > MAX_REASON_LENGTH:
        raise InvalidDecision(request_id, f"reason is longer than {MAX_REASON_LENGTH} characters")
    if ruling is Ruling.REJECT and args is not None:
        raise InvalidDecision(request_id, "edited arguments only go with approve")
    if ruling is Ruling.REJECT and not (reason and reason.strip()):
        if require_reason:
            raise InvalidDecision(request_id, "a rejection needs a reason")
        reason = NO_REASON
    if args is not None and not isinstance(args, dict):
        raise InvalidDecision(request_id, "edited arguments must be a JSON object")
    if KIND_RULES[DecisionKind(ruling.value)].takes_message:
        _check_answer(request_id, message, reason=reason, args=args)
    elif message is not None:
        raise InvalidDecision(request_id, "a message (an answer) only goes with respond")
    return ruling, reason


async def _approval(
    request_id: str,
    request: PendingCall,
    args: dict[str, Any] | None,
    recheck: EditRecheck | None,
) -> tuple[DecisionKind, dict[str, Any] | None, str | None]:
    """An approval's kind, and its edited arguments with their identity (``None`` unless it
    is an edit). Arguments are validated against the schema recorded with the request, and
    changed ones checked by the policy again (``recheck``)."""
    shown_args = request.shown.get("args")
    edits = args is not None and args != shown_args
    if not edits:
        _check_offered(request_id, request, DecisionKind.APPROVE)
    if args is None:
        return DecisionKind.APPROVE, None, None
    if edits and DecisionKind.EDIT not in request.allowed_decisions:
        # Not the offered kinds: allow_edit and the quorum refuse an edit in words of their own.
        raise InvalidDecision(
            request_id, _not_offered(request, KIND_RULES[DecisionKind.EDIT].refused_as)
        )
    if not request.allow_edit and args != shown_args:
        raise InvalidDecision(
            request_id, "this request cannot be edited, only approved or rejected"
        )
    # A redacted argument cannot be edited; its marker's schema errors are not the
    # approver's to fix (the original value is restored and validated before it runs).
    check_edit(request_id, args, request.shown)
    errors = visible_errors(schema_errors(request.args_schema, args), request.shown)
    if errors:
        raise EditedArgumentsInvalid(request_id, errors)
    if args != shown_args:
        check_sole_approver(request_id, DecisionKind.EDIT, request.quorum)
        if recheck is None:
            # An edit can change what a call does; without the policy to check it against,
            # it is refused rather than run on the editor's word alone.
            raise EditRefused(request_id, None, "edits cannot be checked here")
        args = await recheck(request, args)
    args_identity = call_identity(
        run_id=request.run_id, call_id=request.call_id, tool=request.tool, args=args
    )
    if args == shown_args:
        return DecisionKind.APPROVE, None, None
    return DecisionKind.EDIT, args, args_identity


def _standing_offer(
    request_id: str,
    request: PendingCall,
    kind: DecisionKind,
    grants: StandingGrants | None,
) -> tuple[Offer, StandingGrants]:
    """What an "always" decision grants (``approvals.grants``): refused unless the request's
    rule offers it, one approver decides, and the decision is an approval as shown or a
    rejection (an edit or an answer is about one call only)."""
    offer = Offer.of(request.shown)
    if offer is None or request.quorum > 1:
        raise InvalidDecision(
            request_id, "this request cannot be decided always; its rule does not allow it"
        )
    if kind not in (DecisionKind.APPROVE, DecisionKind.REJECT):
        raise InvalidDecision(
            request_id, f"only an approval as shown or a rejection can be always, not {kind}"
        )
    if grants is None:
        raise InvalidDecision(request_id, "standing grants are not kept here")
    return offer, grants


async def _intact_request(
    requests: ApprovalRequests, request_id: str, read: PendingCall | None, *, principal: str
) -> PendingCall:
    """The request (``read`` where it is the one), whose shown copy is still the one recorded."""
    request = read if read is not None and read.id == request_id else await requests.get(request_id)
    if request is None:
        raise RequestNotFound(request_id)
    if not request.shown_intact:
        # What the decider was shown is not what was recorded: no decision can be bound to it.
        await requests.record_tampered(request, principal=principal)
        raise ShownCopyChanged(request_id)
    return request


async def decide(
    requests: ApprovalRequests,
    decisions: Decisions,
    request_id: str,
    verdict: Ruling | str,
    *,
    principal: str,
    reason: str | None = None,
    args: dict[str, Any] | None = None,
    recheck: EditRecheck | None = None,
    message: str | None = None,
    check: RequestCheck | None = None,
    override_by: str | None = None,
    read: PendingCall | None = None,
    require_reason: bool = False,
    always: bool = False,
    grants: StandingGrants | None = None,
) -> DecisionRecord | Vote:
    """Decide one pending call as ``principal``.

    ``always``: also a standing grant in ``grants``, where offered (``approvals.grants``).

    A rejection without a reason is recorded with ``NO_REASON`` (HumanInTheLoopMiddleware's
    reject needs none), unless ``require_reason`` (``APPROVALS_REQUIRE_REJECT_REASON``).

    Edited arguments go through ``recheck`` (the policy, again) before anything is consumed;
    without one, edits are refused. A request whose shown copy no longer matches its digest is
    refused (``ShownCopyChanged``) and the refusal recorded.

    ``respond`` (ask-a-human tools) takes ``message``, the answer the model receives in place of
    the tool's result; the tool never runs. Each decision is refused unless the request offers
    it (``allowed_decisions``; ``approvals.decision_kinds`` has each kind's rules).

    ``check`` (the approver rules, for a decider who signed in) is applied in the transaction
    that consumes the request, to the request as it stands then; ``override_by`` records an
    operator's override instead (see ``Decisions.decide``). ``read``: the request as the caller
    read it a moment ago (``Engine.decide``, to check who may see it), not read again; every
    check here and under the row lock applies to it all the same.

    A request already decided (or expired, superseded, cancelled) when it was read is refused
    once the decision is known to be valid, without the transaction: such a status never goes
    back to pending, so the transaction could only refuse it too (a lost race is the usual
    case: two approvers reaching one request).

    Raises ``InvalidRequestId`` (malformed), ``RequestNotFound`` (unknown),
    ``RequestNotPending`` (decided, expired or superseded; also when another decider won a
    race), ``InvalidDecision`` or ``EditedArgumentsInvalid``.
    """
    canonical = parse_request_id(request_id)
    # Refused here, before anything is read or written: text PostgreSQL cannot store, NaN,
    # nesting that would exhaust the schema validator (InvalidValue names the field).
    check_inputs(reason=reason, args=args, principal=principal, message=message)
    ruling, reason = _checked_verdict(
        canonical,
        verdict,
        principal=principal,
        reason=reason,
        args=args,
        message=message,
        require_reason=require_reason,
    )
    request = await _intact_request(requests, canonical, read, principal=principal.strip())
    kind, args, args_identity = await _kind_of(canonical, request, ruling, args, recheck)
    standing = _standing_offer(canonical, request, kind, grants) if always else None
    _still_pending(canonical, request)
    decided = await _consume(
        decisions,
        request,
        kind,
        principal=principal.strip(),
        # An answer (the tool's result) is kept as the decision's reason, so audited too.
        reason=message if KIND_RULES[kind].takes_message else reason,
        args=args,
        args_identity=args_identity,
        check=check,
        override_by=override_by,
    )
    await _grant_always(standing, decided, principal.strip())
    return decided


async def _consume(
    decisions: Decisions,
    request: PendingCall,
    kind: DecisionKind,
    *,
    principal: str,
    reason: str | None,
    args: dict[str, Any] | None,
    args_identity: str | None,
    check: RequestCheck | None,
    override_by: str | None,
) -> DecisionRecord | Vote:
    """Consume ``request`` with a decision of ``kind`` (``Decisions.decide``), in its span."""
    rules = KIND_RULES[kind]
    with run_span(
        "approvals.decide",
        request.run_id,
        request_id=request.id,
        decision=kind,
        approver=principal,
        override_by=override_by,
        tool=request.tool,
        call_id=request.call_id,
    ):
        return await decisions.decide(
            request.id,
            kind=kind,
            principal=principal,
            reason=reason,
            args=args if rules.takes_args else None,
            args_identity=args_identity if rules.takes_args else None,
            check=check,
            override_by=override_by,
        )


async def _kind_of(
    request_id: str,
    request: PendingCall,
    ruling: Ruling,
    args: dict[str, Any] | None,
    recheck: EditRecheck | None,
) -> tuple[DecisionKind, dict[str, Any] | None, str | None]:
    """The stored kind of a decision the request offers, with an edit's arguments and their
    identity (``_approval``); ``InvalidDecision`` for one it does not offer."""
    if ruling is Ruling.APPROVE:
        return await _approval(request_id, request, args, recheck)
    kind = DecisionKind(ruling.value)
    _check_offered(request_id, request, kind)
    return kind, args, None


async def _grant_always(
    standing: tuple[Offer, StandingGrants] | None,
    decided: DecisionRecord | Vote,
    principal: str,
) -> None:
    """The standing grant an "always" decision makes, once the decision is stored. After the
    decision's own statement: should this fail, the decision stands for its call alone and the
    error is raised (later calls ask again: the safe side)."""
    if standing is None or not isinstance(decided, DecisionRecord):
        return
    offer, keeper = standing
    await keeper.make_grant(
        request_id=decided.request_id,
        decision_id=decided.id,
        ruling=KIND_RULES[decided.kind].ruling,
        offer=offer,
        principal=principal,
    )
