"""``approvals.edit_coverage``: an approver's edit is covered by their decision only where the rule
it lands in would have offered them approve and edit on a request for the edited arguments
(issue 30, items 1 and 2). The property test builds that direct request with the code the
engine records requests with (``graphs.hooks.approval``) and checks that a covered edit never gets
more than it would have been offered."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from approvals.authz import ApproverRules
from approvals.edit_coverage import KNOWN_APPROVAL_KEYS, edit_coverage
from approvals.model import DECISION_TYPES, EscalationStep, OnExpiry, PendingCall, RequestStatus
from approvals.policy.evaluation import Escalation, _approval_block
from approvals.ports import NewRequest
from approvals.principals import Principal
from approvals.redaction import redact_shown, redacted_paths, restore
from graphs.hooks.approval import _escalated

ORIGINAL: dict[str, Any] = {
    "order_id": "1001",
    "amount": 25.0,
    "reason": "customer request",
    "meta": {"note": "first order"},
}
BIG: dict[str, Any] = {**ORIGINAL, "order_id": "1004", "amount": 980.5}
STARTER = "local:alice"
GROUPS = ("support", "finance", "approvers")
PATHS = ("order_id", "amount", "meta", "meta.note")
#: What a policy's rule for small refunds writes (``refunds-need-support``).
SUPPORT = {
    "rule": "refunds-need-support",
    "approvers": ["support"],
    "expires_in_seconds": 86400,
    "allow_edit": True,
    "quorum": 1,
}


def _new(args: dict[str, Any]) -> NewRequest:
    """What the tool step records before a policy shapes it (``graphs.tool_call.step``)."""
    return NewRequest(
        run_id="00000000-0000-4000-8000-000000000001",
        thread_id="t",
        call_id="refund-1001",
        tool="issue_refund",
        shown={"tool": "issue_refund", "description": "Refund an order.", "args": args},
        args_schema={},
        identity="jcs-sha256:x",
        reason=None,
        requested_by=STARTER,
        expires_at=datetime.now(UTC) + timedelta(days=1),
    )


def direct_request(approval: dict[str, Any], args: dict[str, Any]) -> PendingCall:
    """The request the engine records when a policy escalates ``args`` with ``approval``
    directly: the resolver's shaping (``_escalated``) and redaction, as stored."""
    new = _escalated(_new(args), "escalated", approval)
    new = dataclasses.replace(new, shown=redact_shown(new.shown, approval.get("redact")))
    now = datetime.now(UTC)
    return PendingCall(
        id="00000000-0000-4000-8000-000000000002",
        run_id=new.run_id,
        thread_id=new.thread_id,
        call_id=new.call_id,
        tool=new.tool,
        shown=new.shown,
        args_schema=new.args_schema,
        identity=new.identity,
        reason=new.reason,
        interrupt_id=None,
        state_version=None,
        requested_by=new.requested_by,
        status=RequestStatus.PENDING,
        created_at=now,
        expires_at=new.expires_at,
        decided_at=None,
        approvers=new.approvers,
        allow_edit=new.allow_edit,
        allowed_decisions=new.allowed_decisions,
        quorum=new.quorum,
        on_expiry=new.on_expiry,
        escalation_chain=new.escalation_chain,
        requested_by_person=STARTER,
        proposed_by=new.proposed_by,
    )


def edited(decided: PendingCall, changes: dict[str, Any]) -> dict[str, Any]:
    """``changes`` made by an approver of ``decided``, as they run: withheld values put back."""
    return restore({**ORIGINAL, **changes}, ORIGINAL, redacted_paths(decided.shown))


def test_an_edit_that_stays_in_the_rule_it_was_decided_under_is_covered() -> None:
    decided = direct_request(SUPPORT, ORIGINAL)
    coverage = edit_coverage(decided, SUPPORT, edited(decided, {"amount": 10.0}))
    assert coverage.covered, coverage.reason
    assert coverage.rule == "refunds-need-support"
    # Another rule that offers the same: same groups (or more), same redaction.
    wider = {**SUPPORT, "rule": "any-refund", "approvers": ["support", "finance"]}
    assert edit_coverage(decided, wider, BIG).covered


def test_a_redacting_rule_covers_an_edit_that_withholds_the_same_arguments() -> None:
    cards = {**SUPPORT, "redact": ["order_id", "meta.note"]}
    decided = direct_request(cards, ORIGINAL)
    assert decided.shown["args"]["order_id"] == "[redacted]"
    assert edit_coverage(decided, cards, edited(decided, {"amount": 10.0})).covered
    assert not edit_coverage(decided, {**cards, "redact": ["order_id"]}, ORIGINAL).covered


@pytest.mark.parametrize(
    ("landing", "why"),
    [
        # Item 1: the rule for big refunds lets support answer or reject, never approve.
        ({"allowed_decisions": ["respond", "reject"]}, "does not offer approve or edit"),
        ({"allowed_decisions": ["approve", "reject"]}, "does not offer edit"),
        # Item 2: no edits, and the order is withheld from its approvers.
        ({"allow_edit": False, "redact": ["order_id"]}, "does not offer edit"),
        ({"redact": ["order_id"]}, "withholds other arguments"),
        ({"quorum": 2}, "does not offer edit"),
        ({"approvers": ["finance"]}, "asks for other approvers"),
        ({"approvers": []}, "asks for other approvers"),
        ({"separation_of_duties": ["local:sue"]}, "sets separation_of_duties"),
        ({"allow_edit": "yes"}, "allow_edit is not true or false"),
        ({"allowed_decisions": "approve"}, "allowed_decisions are not a list"),
        ({"allowed_decisions": []}, "allowed_decisions are not a list"),
        ({"quorum": 0}, "quorum is not a number"),
        ({"quorum": True}, "quorum is not a number"),
        ({"approvers": "support"}, "approvers are not a list"),
        ({"redact": "order_id"}, "redact is not a list"),
        ({"redact": ["order_id..x"]}, "withholds other arguments"),
    ],
)
def test_an_edit_into_a_rule_that_would_not_offer_it_is_not_covered(
    landing: dict[str, Any], why: str
) -> None:
    decided = direct_request(SUPPORT, ORIGINAL)
    block = {**SUPPORT, "rule": "big-refunds", **landing}
    coverage = edit_coverage(decided, block, BIG)
    assert not coverage.covered
    assert coverage.rule == "big-refunds"
    assert why in coverage.reason
    assert coverage.reason.startswith("the rule big-refunds: ")


def test_a_decided_request_that_offered_no_edit_covers_nothing() -> None:
    decided = direct_request({**SUPPORT, "allow_edit": False}, ORIGINAL)
    assert not edit_coverage(decided, SUPPORT, BIG).covered


def test_every_key_a_policy_writes_into_an_approval_block_is_weighed() -> None:
    # A key the policy writes but coverage does not know would make every edit into such a
    # rule a new request (fail closed); this says when a new key needs weighing.
    escalation = Escalation(
        rule="r",
        approvers=("support",),
        expires_in=timedelta(hours=1),
        allow_edit=False,
        quorum=2,
        on_expiry=OnExpiry.ESCALATE,
        then=(EscalationStep(approvers=("finance",), expires_in=timedelta(hours=1)),),
        redact=("order_id",),
        allowed_decisions=("approve", "reject"),
    )
    written = set(_approval_block(escalation))
    assert written == KNOWN_APPROVAL_KEYS


def test_a_shown_copy_or_arguments_that_cannot_be_read_are_not_covered() -> None:
    decided = direct_request(SUPPORT, ORIGINAL)
    assert not edit_coverage(decided, SUPPORT, None).covered
    assert not edit_coverage(decided, SUPPORT, ["not", "arguments"]).covered


# ---- the property: a covered edit never gets more than a direct request would offer ----------

JUNK = st.one_of(st.none(), st.text(max_size=3), st.integers(-2, 3), st.booleans())
GROUP_LISTS = st.lists(st.sampled_from(GROUPS), unique=True, max_size=3)
PATH_LISTS = st.lists(st.sampled_from(PATHS), unique=True, max_size=3)
DECISION_LISTS = st.lists(st.sampled_from(DECISION_TYPES), unique=True, max_size=4)

#: The block of the rule the approver decided under: one a policy writes.
DECIDED_BLOCKS = st.fixed_dictionaries(
    {"rule": st.just("decided-rule")},
    optional={
        "approvers": GROUP_LISTS,
        "allow_edit": st.booleans(),
        "quorum": st.integers(1, 3),
        "redact": PATH_LISTS,
        "allowed_decisions": DECISION_LISTS.filter(bool),
    },
)
#: The fields a landing block may set: well formed, malformed, and keys no rule writes yet.
LANDING_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "rule": st.sampled_from(["landing-rule", "decided-rule"]),
        "approvers": st.one_of(GROUP_LISTS, JUNK, st.lists(JUNK, max_size=2)),
        "allow_edit": st.one_of(st.booleans(), JUNK),
        "quorum": st.one_of(st.integers(-1, 25), JUNK),
        "redact": st.one_of(PATH_LISTS, JUNK, st.lists(st.text(max_size=4), max_size=2)),
        "allowed_decisions": st.one_of(DECISION_LISTS, JUNK, st.lists(st.text(max_size=6))),
        "expires_in_seconds": st.one_of(st.integers(-5, 10**6), JUNK),
        "on_expiry": st.sampled_from(["reject", "escalate", "never"]),
        "then": st.one_of(st.just([]), JUNK),
        "separation_of_duties": st.lists(st.sampled_from(["local:sue", STARTER])),
        "min_approvers_level": st.integers(0, 3),
        "deny_edit_paths": PATH_LISTS,
    },
)
CHANGES = st.fixed_dictionaries(
    {},
    optional={
        "order_id": st.sampled_from(["1001", "1004"]),
        "amount": st.sampled_from([10.0, 25.0, 980.5]),
        "reason": st.text(max_size=5),
        "meta": st.one_of(st.just({"note": "changed"}), st.just("flat"), st.just({})),
    },
)
PRINCIPALS = st.lists(
    st.builds(
        Principal.local,
        st.sampled_from(["alice", "sue", "tom", "fay"]),
        st.frozensets(st.sampled_from((*GROUPS, "operators"))),
    ),
    min_size=1,
    max_size=4,
)


@settings(deadline=None)
@given(
    decided_block=DECIDED_BLOCKS,
    keep_decided=st.booleans(),
    landing_fields=LANDING_FIELDS,
    changes=CHANGES,
    principals=PRINCIPALS,
)
def test_a_covered_edit_never_gets_more_than_a_direct_request_would_offer(
    decided_block: dict[str, Any],
    keep_decided: bool,
    landing_fields: dict[str, Any],
    changes: dict[str, Any],
    principals: list[Principal],
) -> None:
    decided = direct_request(decided_block, ORIGINAL)
    args = edited(decided, changes)
    # Half the time the edit lands in a rule that starts as the decided one, so covered
    # answers are common enough to test.
    landing = {**(decided_block if keep_decided else {}), **landing_fields}

    coverage = edit_coverage(decided, landing, args)

    event("covered" if coverage.covered else "not covered")
    if not coverage.covered:
        assert coverage.reason
        return
    assert set(landing) <= KNOWN_APPROVAL_KEYS
    direct = direct_request(landing, args)
    for kind in ("approve", "edit"):
        assert kind in decided.offered_decisions
        assert kind in direct.offered_decisions
    # It shows the editor's arguments exactly as the editor saw them: nothing hidden from the
    # rule's approvers was seen or edited, and nothing the rule shows was approved unseen.
    assert set(redacted_paths(direct.shown)) == set(redacted_paths(decided.shown))
    rules = ApproverRules()
    for principal in principals:
        if rules.may_decide(principal, decided):
            # Whoever could decide the edited request could decide the direct one.
            assert rules.may_decide(principal, direct), principal
