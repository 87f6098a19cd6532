"""Approval requests, their consumption (decisions and quorum votes) and the expiry sweep, in
memory: the rules of ``storage/requests.py`` and ``sweep_expired``, minus the audit log."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from typing import Any

from approvals.decision_kinds import KIND_RULES, DecisionKind, counts_as_vote
from approvals.errors import AlreadyVoted, NotAllowed, RequestNotFound, RequestNotPending
from approvals.identity import shown_digest
from approvals.memory.store import MemoryStore, now
from approvals.model import DecisionRecord, OnExpiry, PendingCall, SweepResult, Vote
from approvals.ports import NewRequest
from approvals.states import RequestStatus


class MemoryApprovalRequests:
    """Pending-call records keyed by (run, call, identity); at most one pending per call."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        self._store = store if store is not None else MemoryStore()

    async def open(self, new: NewRequest) -> tuple[PendingCall, DecisionRecord | None]:
        store = self._store
        same_call = [
            r
            for r in store.requests.values()
            if r.run_id == new.run_id and r.call_id == new.call_id
        ]
        found = next((r for r in same_call if r.identity == new.identity), None)
        if found is None:
            at = now()
            for older in same_call:
                if older.status is RequestStatus.PENDING:
                    store.requests[older.id] = dataclasses.replace(
                        older, status=RequestStatus.SUPERSEDED, decided_at=at
                    )
            found = PendingCall(
                id=str(uuid.uuid4()),
                run_id=new.run_id,
                thread_id=new.thread_id,
                call_id=new.call_id,
                tool=new.tool,
                shown=new.shown,
                args_schema=new.args_schema,
                identity=new.identity,
                reason=new.reason,
                interrupt_id=None,
                state_version=new.state_version,
                requested_by=new.requested_by,
                status=RequestStatus.PENDING,
                created_at=at,
                expires_at=new.expires_at,
                decided_at=None,
                approvers=new.approvers,
                allow_edit=new.allow_edit,
                allowed_decisions=new.allowed_decisions,
                quorum=new.quorum,
                on_expiry=new.on_expiry,
                escalation_chain=new.escalation_chain,
                requested_by_person=store.person_of(new.requested_by),
                # The editor as a person: their token and their web account are one editor.
                proposed_by=store.person_of(new.proposed_by) or new.proposed_by,
                shown_digest=shown_digest(
                    run_id=new.run_id, call_id=new.call_id, tool=new.tool, shown=new.shown
                ),
            )
            store.requests[found.id] = found
        return found, store.decisions.get(found.id)

    async def get(self, request_id: str) -> PendingCall | None:
        return self._store.requests.get(request_id)

    async def for_run(self, run_id: str) -> list[PendingCall]:
        found = [r for r in self._store.requests.values() if r.run_id == run_id]
        return sorted(found, key=lambda r: (r.created_at, r.id))

    async def record_tampered(self, request: PendingCall, *, principal: str | None) -> None:
        if request.id in self._store.requests:
            self._store.tampered.setdefault(request.id, (principal, request.current_shown_digest()))

    async def votes(self, request_id: str) -> list[str]:
        """Who approved a request that waits for more approvers (the principals), in order."""
        return [principal for principal, _ in self._store.votes.get(request_id, [])]


class MemoryDecisions:
    """Consumes a pending request at most once; approvals towards a quorum count once per
    person."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        self._store = store if store is not None else MemoryStore()

    async def decide(
        self,
        request_id: str,
        *,
        kind: DecisionKind,
        principal: str,
        reason: str | None,
        args: dict[str, Any] | None,
        args_identity: str | None,
        check: Callable[[PendingCall], None] | None = None,
        override_by: str | None = None,
    ) -> DecisionRecord | Vote:
        """``override_by`` is kept by the PostgreSQL adapter's audit event only (this one
        writes no audit log)."""
        store = self._store
        request = store.requests.get(request_id)
        if request is None:
            raise RequestNotFound(request_id)
        if check is not None:
            check(request)
        pending = request.status is RequestStatus.PENDING
        if not pending or request.expires_at <= now():
            raise RequestNotPending(request_id, "expired" if pending else request.status)
        if counts_as_vote(request_id, kind, request.quorum):
            votes = store.votes.setdefault(request_id, [])
            person = store.person_of(principal)
            if person is None:
                raise NotAllowed(
                    request_id,
                    f"{principal} is a service token (it has no owner): it may start"
                    " runs but never decide",
                )
            earlier = next((p for p, voter in votes if voter == person), None)
            if earlier is not None:
                raise AlreadyVoted(request_id, earlier)
            votes.append((principal, person))
            if len(votes) < request.quorum:
                return Vote(
                    request_id=request_id,
                    principal=principal,
                    approvals=len(votes),
                    quorum=request.quorum,
                )
        return store.consume(
            request,
            status=KIND_RULES[kind].leaves,
            kind=kind,
            principal=principal,
            reason=reason,
            args=args,
            args_identity=args_identity,
        )


class MemoryExpiry:
    """Escalates or expires every pending request past its deadline, each once."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        self._store = store if store is not None else MemoryStore()

    async def sweep(self) -> SweepResult:
        store = self._store
        at = now()
        due = sorted(
            (
                r
                for r in store.requests.values()
                if r.status is RequestStatus.PENDING and r.expires_at <= at
            ),
            key=lambda r: r.expires_at,
        )
        escalated: list[str] = []
        expired: list[str] = []
        for request in due:
            if request.on_expiry is OnExpiry.ESCALATE and request.escalation_chain:
                step, *rest = request.escalation_chain
                store.requests[request.id] = dataclasses.replace(
                    request,
                    approvers=step.approvers,
                    expires_at=at + step.expires_in,
                    escalation_chain=tuple(rest),
                    escalation_level=request.escalation_level + 1,
                )
                escalated.append(request.id)
            else:
                store.consume(
                    request,
                    status=RequestStatus.EXPIRED,
                    kind=DecisionKind.REJECT,
                    principal="system:expiry",
                    reason="expired",
                )
                expired.append(request.id)
        return SweepResult(escalated=tuple(escalated), expired=tuple(expired))
