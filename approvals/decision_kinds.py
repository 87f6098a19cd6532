"""The kinds of decision a human can make on a pending call, and the rules of each, in one table.

The decision service (``approvals.decisions``), both adapters (``approvals.memory``,
``storage``) and the faces read :data:`KIND_RULES`: what a kind carries, whether it needs a
sole approver, the status it leaves the request in, the verdict it becomes, and where it may be
offered. A request offers the rows its ``allowed_decisions`` name, as far as its quorum and
``allow_edit`` let it (``PendingCall.offered_rules``).

A new kind is a row here, a migration (the database checks the kinds it stores and the
decisions a request may offer) and its form on the request's page
(``web/templates/decision_forms/KIND.html``).
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from approvals.errors import InvalidDecision
from approvals.states import RequestStatus


class Ruling(enum.StrEnum):
    """What a human said about a pending call: the verdict a decision becomes."""

    APPROVE = "approve"
    REJECT = "reject"
    #: An answer in the tool's place, returned to the model as its result (ask-a-human tools).
    RESPOND = "respond"


class DecisionKind(enum.StrEnum):
    """The stored kind of a decision: an approval with edited arguments is an ``edit``."""

    APPROVE = "approve"
    REJECT = "reject"
    EDIT = "edit"
    #: The human's answer (kept as the decision's ``reason``) is the tool's result; it never ran.
    RESPOND = "respond"


class WithQuorum(enum.StrEnum):
    """What a decision of a kind does to a pending request that needs several approvers."""

    #: Counted once per person; the one that completes the quorum consumes the request.
    VOTES = "votes"
    #: Consumes it at once: one rejection rejects.
    DECIDES = "decides"
    #: Refused: the kind needs a sole approver (an edit or an answer is not a vote).
    REFUSED = "refused"


@dataclass(frozen=True, kw_only=True, slots=True)
class KindRules:
    """The rules of one decision kind: one row of :data:`KIND_RULES`."""

    kind: DecisionKind
    #: The verdict it becomes (an edit is an approval of changed arguments).
    ruling: Ruling
    #: The status a decision of this kind leaves its request in.
    leaves: RequestStatus
    #: Whether it carries arguments (checked against the request's schema and its run's
    #: policy); a request offers it only where ``allow_edit`` says so.
    takes_args: bool
    #: Whether it carries a message: the answer the model receives in the tool's place, kept
    #: as the decision's ``reason``.
    takes_message: bool
    #: What it does to a request that needs several approvers.
    with_quorum: WithQuorum
    #: Whether a request offers it unless its tool or policy says otherwise.
    by_default: bool
    #: Whether a Slack message may offer it as a button (no arguments can be typed there: an
    #: edit links to the web form instead).
    in_slack: bool
    #: Whether an e-mail may carry a one-time link for it (a link carries no text).
    in_email: bool
    #: Where its form sits among the decision forms of a request's page, first to last.
    form_position: int
    #: Completes "this request cannot be ...; it offers: ..." when a request does not offer it.
    refused_as: str
    #: Completes "this request needs N approvers, so ..." (a kind that needs a sole approver).
    alone_because: str = ""

    @property
    def sole_approver(self) -> bool:
        """Whether it can be made only where one approver decides (quorum 1)."""
        return self.with_quorum is WithQuorum.REFUSED

    @property
    def runs_tool(self) -> bool:
        """Whether the tool may run after it: an answer stands in for it, as a rejection stops
        it."""
        return self.ruling is Ruling.APPROVE


#: Every kind and its rules, in the order of the ``HumanInTheLoopMiddleware`` vocabulary
#: (``DECISION_TYPES``: the order a request's ``allowed_decisions`` are kept and shown in).
KIND_RULES: dict[DecisionKind, KindRules] = {
    rules.kind: rules
    for rules in (
        KindRules(
            kind=DecisionKind.APPROVE,
            ruling=Ruling.APPROVE,
            leaves=RequestStatus.APPROVED,
            takes_args=False,
            takes_message=False,
            with_quorum=WithQuorum.VOTES,
            by_default=True,
            in_slack=True,
            in_email=True,
            form_position=0,
            refused_as="approved as shown",
        ),
        KindRules(
            kind=DecisionKind.EDIT,
            ruling=Ruling.APPROVE,
            leaves=RequestStatus.APPROVED,
            takes_args=True,
            takes_message=False,
            with_quorum=WithQuorum.REFUSED,
            by_default=True,
            in_slack=False,
            in_email=False,
            form_position=3,
            refused_as="edited",
            alone_because="its arguments cannot be edited; approve or reject them as shown",
        ),
        KindRules(
            kind=DecisionKind.REJECT,
            ruling=Ruling.REJECT,
            leaves=RequestStatus.REJECTED,
            takes_args=False,
            takes_message=False,
            with_quorum=WithQuorum.DECIDES,
            by_default=True,
            in_slack=True,
            in_email=True,
            form_position=2,
            refused_as="rejected",
        ),
        KindRules(
            kind=DecisionKind.RESPOND,
            ruling=Ruling.RESPOND,
            leaves=RequestStatus.ANSWERED,
            takes_args=False,
            takes_message=True,
            with_quorum=WithQuorum.REFUSED,
            by_default=False,
            in_slack=True,
            in_email=False,
            form_position=1,
            refused_as="answered in the tool's place",
            alone_because="it cannot be answered in the tool's place; approve or reject it",
        ),
    )
}

#: The decisions a request may offer, in the ``HumanInTheLoopMiddleware`` vocabulary.
DECISION_TYPES = tuple(kind.value for kind in KIND_RULES)
#: What a request offers unless its tool or policy says otherwise (respond must be asked for).
DEFAULT_DECISIONS = tuple(kind.value for kind, rules in KIND_RULES.items() if rules.by_default)
#: The statuses of a request a human decided (approved covers edited): final, with a decision.
DECIDED_STATUSES = frozenset(rules.leaves for rules in KIND_RULES.values())


def spoken(names: Iterable[str]) -> str:
    """``a, b or c``: the names as a sentence lists choices."""
    *most, last = names
    return f"{', '.join(most)} or {last}" if most else last


def offered(allowed: Collection[str], *, allow_edit: bool, quorum: int) -> tuple[KindRules, ...]:
    """The kinds a request offers its approvers, in the vocabulary's order: those its
    ``allowed_decisions`` name, where one that takes arguments is offered only if editing is
    allowed, and one that needs a sole approver only if one approver decides."""
    return tuple(
        rules
        for kind, rules in KIND_RULES.items()
        if kind in allowed
        and (allow_edit or not rules.takes_args)
        and (quorum <= 1 or not rules.sole_approver)
    )


def check_sole_approver(request_id: str, kind: DecisionKind, quorum: int) -> None:
    """Refuse (``InvalidDecision``) a decision of a kind that needs a sole approver on a
    request that needs ``quorum`` approvers, more than one."""
    rules = KIND_RULES[kind]
    if quorum > 1 and rules.sole_approver:
        raise InvalidDecision(
            request_id, f"this request needs {quorum} approvers, so {rules.alone_because}"
        )


def counts_as_vote(request_id: str, kind: DecisionKind, quorum: int) -> bool:
    """Whether a decision of ``kind`` on a pending request that needs ``quorum`` approvers is
    an approval counted towards it (not one that consumes the request by itself). Refuses
    (``InvalidDecision``) a kind that needs a sole approver where more than one is needed."""
    check_sole_approver(request_id, kind, quorum)
    return quorum > 1 and KIND_RULES[kind].with_quorum is WithQuorum.VOTES
