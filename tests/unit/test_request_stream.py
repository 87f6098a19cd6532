"""Who a request's change is told to: exactly whoever may see the request (the approver rules),
whoever could until an escalation moved it, and the starter of its run; and a feed that falls
behind is told to re-read instead of growing without bound."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from approvals.authz import ApproverRules
from approvals.model import PendingCall, RequestStatus
from approvals.principals import Principal
from storage.request_events import RequestEvent, RequestEventKind, RequestFeed
from web.faces.request_stream import hears

RULES = ApproverRules(default_group="approvers", operator_group="operators")
GROUPS = st.frozensets(st.sampled_from(["approvers", "operators", "support", "finance", "ops"]))
NAMES = st.sampled_from(["ann", "bob", "shop"])


def pending(approvers: frozenset[str], requested_by: str) -> PendingCall:
    now = datetime.now(UTC)
    return PendingCall(
        id="00000000-0000-4000-8000-000000000000",
        run_id="00000000-0000-4000-8000-000000000001",
        thread_id="t",
        call_id="c",
        tool="issue_refund",
        shown={"args": {}},
        args_schema={},
        identity="i",
        reason=None,
        interrupt_id=None,
        state_version=None,
        requested_by=requested_by,
        status=RequestStatus.PENDING,
        created_at=now,
        expires_at=now,
        decided_at=None,
        approvers=tuple(sorted(approvers)),
    )


def event(
    approvers: frozenset[str],
    requested_by: str,
    *,
    kind: RequestEventKind = RequestEventKind.OPENED,
    before: frozenset[str] = frozenset(),
    person: str | None = None,
) -> RequestEvent:
    return RequestEvent(
        id="00000000-0000-4000-8000-000000000000",
        run_id="00000000-0000-4000-8000-000000000001",
        tool="issue_refund",
        kind=kind,
        status="pending",
        approvers=approvers,
        from_approvers=before,
        requested_by=requested_by,
        requested_by_person=person,
    )


@given(groups=GROUPS, approvers=GROUPS, name=NAMES, starter=NAMES)
def test_a_change_is_told_to_whoever_may_see_the_request_or_started_its_run(
    groups: frozenset[str], approvers: frozenset[str], name: str, starter: str
) -> None:
    principal = Principal.local(name, groups)
    told = hears(RULES, principal, event(approvers, f"local:{starter}"))
    may_see = RULES.may_see(principal, pending(approvers, f"local:{starter}"))
    assert told == (may_see or name == starter)


@given(groups=GROUPS, before=GROUPS, after=GROUPS)
def test_an_escalation_is_told_to_the_approvers_it_leaves_and_those_it_reaches(
    groups: frozenset[str], before: frozenset[str], after: frozenset[str]
) -> None:
    principal = Principal.local("ann", groups)
    escalated = event(after, "local:shop", kind=RequestEventKind.ESCALATED, before=before)
    could = RULES.may_see(principal, pending(before, "local:shop"))
    can = RULES.may_see(principal, pending(after, "local:shop"))
    assert hears(RULES, principal, escalated) == (could or can)


def test_a_token_hears_of_the_runs_its_owner_started() -> None:
    token = Principal.token("ann-laptop", frozenset({"agents"}), owner="ann")
    service = Principal.token("ci", frozenset({"agents"}))
    started = event(frozenset({"support"}), "local:ann", person="local:ann")
    assert hears(RULES, token, started)
    assert not hears(RULES, service, started)


class _NoHub:
    def unsubscribe(self, feed: RequestFeed) -> None:
        pass


def test_a_feed_that_falls_behind_is_told_to_re_read_instead_of_growing() -> None:
    async def scenario() -> None:
        feed = RequestFeed(_NoHub(), lambda e: True, None, backlog=3)  # type: ignore[arg-type]
        changes = [event(frozenset(), f"local:{i}") for i in range(5)]
        for change in changes:
            feed.push(change)
        news = await feed.wait(1)
        assert news is not None
        assert news.missed
        assert news.events == changes[4:]  # only what came after the overflow
        assert await feed.wait(0.05) is None

    asyncio.run(scenario())
