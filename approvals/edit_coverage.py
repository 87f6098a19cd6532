"""Whether an approver's decision covers the escalation its own edit runs into.

An edit is a new call: its arguments go through ``pre_tool_call`` again, and a policy may
escalate them to a rule of their own (a refund of 25.00 edited into 980.50 lands in the rule for
big refunds). The decision already made satisfies that escalation only when a request recorded
under the landing rule, for the edited arguments, would have offered the same approver the same
decision: ``approve``, and ``edit`` as well, because the change is itself an edit. Otherwise the
edit is not the editor's to make alone (``graphs.tool_call.edits`` turns it into a new request
under that rule, which the editor may not decide).

Every field of the landing rule's approval block binds:

- ``allowed_decisions`` and ``allow_edit``: both approve and edit must be offered;
- ``quorum``: edits are offered only where one approver decides, so only a quorum of one;
- ``approvers``: every group that may decide the decided request may decide the landing one
  (an empty list is the default group, whose name is not known here: only empty matches it);
- ``redact``: the landing rule must withhold exactly the arguments the editor was not shown.
  Withholding more would hide from its approvers what the editor saw and typed (and forbid
  editing it); withholding less would approve values its approvers must see, unseen;
- separation of duties: the landing request belongs to the same run, so it refuses the same
  starter; a direct request has no proposer, so it refuses no one the decided request allowed;
- ``expires_in_seconds``, ``on_expiry``, ``then`` and ``rule`` say when and to whom the request
  passes later, or name it: they change nothing that is offered now.

A key not in :data:`KNOWN_APPROVAL_KEYS`, or a known key whose value is not one the engine
reads, is not covered: a field a later rule adds fails closed until this module weighs it.

The answer holds for every approver who may decide the decided request (the approver rules of
``approvals.authz`` count groups, the run's starter and the proposer, and each of those is the
same or looser on the landing request), so it needs no facts about the editor beyond that they
decided: the same function serves the decision (where the engine knows the editor) and the call
about to run (where the host knows only the stored request).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from approvals.decision_kinds import DECISION_TYPES, DEFAULT_DECISIONS
from approvals.model import MAX_QUORUM, PendingCall
from approvals.redaction import SHOWN_KEY, redact_shown, redacted_paths

#: Every key of an approval block this module weighs (``approvals.policy.evaluation`` writes
#: them; ``graphs.langchain.interrupt_on`` writes a subset). Any other key is not covered.
KNOWN_APPROVAL_KEYS = frozenset(
    {
        "rule",
        "approvers",
        "expires_in_seconds",
        "allow_edit",
        "quorum",
        "on_expiry",
        "then",
        "redact",
        "allowed_decisions",
    }
)
#: What an edit is: an approval of changed arguments. The landing rule must offer both.
EDIT_DECISIONS = ("approve", "edit")


@dataclass(frozen=True, kw_only=True, slots=True)
class EditCoverage:
    """What :func:`edit_coverage` found."""

    covered: bool
    #: The rule the edit landed in, when the block names one.
    rule: str | None = None
    #: Why the decision does not cover the landing rule (empty when it does).
    reason: str = ""


class _Unreadable(ValueError):
    """An approval block field holds a value the engine does not read: fail closed."""


def _rule_of(approval: Mapping[str, Any]) -> str | None:
    rule = approval.get("rule")
    return rule if isinstance(rule, str) and rule else None


def _approvers(approval: Mapping[str, Any]) -> tuple[str, ...]:
    value = approval.get("approvers", [])
    if not isinstance(value, list) or not all(isinstance(a, str) and a for a in value):
        raise _Unreadable("its approvers are not a list of group names")
    return tuple(value)


def _allow_edit(approval: Mapping[str, Any]) -> bool:
    value = approval.get("allow_edit", True)
    if not isinstance(value, bool):
        raise _Unreadable("its allow_edit is not true or false")
    return value


def _allowed_decisions(approval: Mapping[str, Any]) -> tuple[str, ...]:
    if "allowed_decisions" not in approval:
        return DEFAULT_DECISIONS
    value = approval["allowed_decisions"]
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(d, str) and d in DECISION_TYPES for d in value)
    ):
        raise _Unreadable("its allowed_decisions are not a list of decisions")
    return tuple(d for d in DECISION_TYPES if d in value)


def _quorum(approval: Mapping[str, Any]) -> int:
    value = approval.get("quorum", 1)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_QUORUM:
        raise _Unreadable("its quorum is not a number of approvers")
    return value


def _shown(decided: PendingCall, approval: Mapping[str, Any], args: Any) -> dict[str, Any]:
    """What a request under the landing rule would show of ``args``."""
    if not isinstance(decided.shown, dict) or not isinstance(args, dict):
        raise _Unreadable("the arguments or what was shown cannot be read")
    spec = approval.get("redact")
    if spec is not None and not (
        isinstance(spec, list) and all(isinstance(p, str) and p for p in spec)
    ):
        raise _Unreadable("its redact is not a list of argument paths")
    base = {k: v for k, v in decided.shown.items() if k != SHOWN_KEY}
    # A path that is not dotted keys makes redact_shown withhold every argument (fail closed).
    return redact_shown({**base, "args": args}, spec)


def _landing_request(decided: PendingCall, approval: Mapping[str, Any], args: Any) -> PendingCall:
    """The request a direct escalation under ``approval`` would record for ``args`` in
    ``decided``'s place, as far as who may decide it and what it offers (same run, call and
    starter; no proposer). Raises ``_Unreadable`` for a block with a key or value it does not
    read."""
    unknown = sorted(str(k) for k in approval if k not in KNOWN_APPROVAL_KEYS)
    if unknown:
        raise _Unreadable(f"it sets {', '.join(unknown)}, which an edit cannot be weighed against")
    return dataclasses.replace(
        decided,
        shown=_shown(decided, approval, args),
        approvers=_approvers(approval),
        allow_edit=_allow_edit(approval),
        allowed_decisions=_allowed_decisions(approval),
        quorum=_quorum(approval),
        proposed_by=None,
    )


def _same_deciders(had: tuple[str, ...], wanted: tuple[str, ...]) -> bool:
    """Whether every group that may decide a request naming ``had`` may decide one naming
    ``wanted``. An empty tuple is the default group, whose name the host does not know: only
    the same (empty) tuple is the same people."""
    if not had or not wanted:
        return not had and not wanted
    return frozenset(had) <= frozenset(wanted)


def edit_coverage(decided: PendingCall, approval: Mapping[str, Any], args: Any) -> EditCoverage:
    """Whether the decision on ``decided`` (an approval with edited arguments) covers the
    escalation ``approval`` (the escalating verdict's approval block) asks for the edited
    ``args`` (as they would run, redacted values put back): whether a request under that
    block would have offered every approver of ``decided`` approve and edit, on the same
    arguments shown and withheld. See the module docstring for what each field means."""
    rule = _rule_of(approval)
    where = f"the rule {rule}" if rule else "the escalation"

    def refused(why: str) -> EditCoverage:
        return EditCoverage(covered=False, rule=rule, reason=f"{where}: {why}")

    if not all(kind in decided.offered_decisions for kind in EDIT_DECISIONS):
        return refused("the decided request did not offer an edit")
    try:
        landing = _landing_request(decided, approval, args)
    except _Unreadable as exc:
        return refused(str(exc))
    missing = [kind for kind in EDIT_DECISIONS if kind not in landing.offered_decisions]
    if missing:
        offered = ", ".join(landing.offered_decisions) or "nothing"
        return refused(f"does not offer {' or '.join(missing)} (it offers {offered})")
    if not _same_deciders(decided.approvers, landing.approvers):
        groups = ", ".join(landing.approvers) or "the default approver group"
        return refused(f"asks for other approvers ({groups})")
    if frozenset(redacted_paths(landing.shown)) != frozenset(redacted_paths(decided.shown)):
        return refused("withholds other arguments than the editor was shown")
    return EditCoverage(covered=True, rule=rule)
