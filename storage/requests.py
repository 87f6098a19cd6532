"""Approval requests and the atomic consumption of a decision."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from psycopg.types.string import TextLoader

from approvals.decision_kinds import KIND_RULES, DecisionKind, counts_as_vote
from approvals.errors import AlreadyVoted, NotAllowed, RequestNotFound, RequestNotPending
from approvals.identity import shown_digest
from approvals.listing import EVERY_REQUEST, PendingOrder, RequestFilter, Scope, Viewer
from approvals.model import DecisionRecord, PendingCall, RequestStatus, Vote
from approvals.ports import NewRequest, RequestCheck
from storage.db import (
    Connection,
    Database,
    Row,
    json,
    read_unreadable_json_as_marker,
    sql,
)
from storage.grants import PgStandingGrants

#: What a list's scope asks of may_decide (the ``decidable`` parameter): anything, yes, no.
_DECIDABLE: dict[Scope, bool | None] = {Scope.SEE: None, Scope.DECIDE: True, Scope.OTHERS: False}


async def custom_planned(
    db: Database,
    name: str,
    params: dict[str, Any],
    *,
    uuids_as_text: bool = False,
) -> list[Row]:
    """The rows of the named list query, planned for these parameters.

    The pool prepares statements, and after five runs PostgreSQL may keep a prepared
    statement's generic plan, one for every viewer and filter, where an operator's list, a
    small group's and a large group's each need their own. An unprepared (unnamed) statement
    is planned for its parameters every time, in the same single round trip.

    ``uuids_as_text``: uuid columns come as their text (as ``str(UUID)`` writes it), for rows
    whose ids are only ever used as strings: an inbox page of 500 made 1,000 ``UUID`` objects
    only to turn each back into its text, about 3 us a row.

    A jsonb value that cannot be decoded comes as ``Unreadable`` (only a rewrite behind the
    engine's back makes one): one such row must not fail the whole list. The runs list shows
    none of a run's input, say, and the run's own page fails with ``StoredValueUnreadable``;
    an approval request holding one counts as tampered (``PendingCall.from_row``)."""
    async with db.connection() as conn:
        cursor = conn.cursor()
        read_unreadable_json_as_marker(cursor)
        if uuids_as_text:
            cursor.adapters.register_loader("uuid", TextLoader)
        await cursor.execute(sql(name), params, prepare=False)
        return await cursor.fetchall()


def list_params(
    viewer: Viewer,
    filters: RequestFilter,
    asof: datetime,
    after: tuple[datetime, str] | None,
    limit: int,
) -> dict[str, Any]:
    """The parameters of a list query (``pending_by_deadline``, ``pending_newest``,
    ``decided_page``; ``decidable`` is added for the first two)."""
    return (
        viewer.params()
        | filters.params(asof, viewer.default_group)
        | {
            "after_key": after[0] if after else None,
            "after_id": after[1] if after else None,
            "limit": limit,
        }
    )


def joined_decision(row: dict[str, Any]) -> DecisionRecord | None:
    """The decision joined to a request row (its columns prefixed ``d_``), if there is one."""
    if row["d_id"] is None:
        return None
    joined = {key[2:]: value for key, value in row.items() if key.startswith("d_")}
    return DecisionRecord.from_row(
        joined | {"request_id": row["id"], "run_id": row["run_id"], "call_id": row["call_id"]}
    )


class PgApprovalRequests(PgStandingGrants):
    """Pending-call records, keyed by (run, call, content identity); also the run's standing
    grants (``approvals.grants.StandingGrants``), which the approval slot asks before it opens
    a request, on the same database."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self._db = db

    async def open(self, new: NewRequest) -> tuple[PendingCall, DecisionRecord | None]:
        params = {
            "id": str(uuid.uuid4()),
            "run_id": new.run_id,
            "thread_id": new.thread_id,
            "call_id": new.call_id,
            "tool": new.tool,
            "shown": json(new.shown),
            "args_schema": json(new.args_schema),
            "identity": new.identity,
            "reason": new.reason,
            "state_version": new.state_version,
            "requested_by": new.requested_by,
            "expires_at": new.expires_at,
            "approvers": list(new.approvers),
            "allow_edit": new.allow_edit,
            "allowed_decisions": list(new.allowed_decisions),
            "quorum": new.quorum,
            "on_expiry": new.on_expiry.value,
            "escalation_chain": json([step.to_json() for step in new.escalation_chain]),
            "proposed_by": new.proposed_by,
            "shown_digest": shown_digest(
                run_id=new.run_id, call_id=new.call_id, tool=new.tool, shown=new.shown
            ),
        }
        row = await self._db.one("open_request", params)
        if row is None:
            # Another session recorded the same call between our snapshot and our insert:
            # its row is committed now, so asking again finds it.
            row = await self._db.one("open_request", params)
        assert row is not None, "open_request returned no row twice"
        return PendingCall.from_row(row), joined_decision(row)

    async def record_tampered(self, request: PendingCall, *, principal: str | None) -> None:
        # Under the request's row lock, in a statement after it: lookers who found it at once
        # each saw no event in their statement's snapshot, and each wrote one.
        async with self._db.transaction() as conn:
            await self._db.one("lock_request_row", {"id": request.id}, conn, unreadable_json=True)
            await self._db.run(
                "record_shown_tampered",
                {
                    "id": request.id,
                    "principal": principal,
                    "found": request.current_shown_digest(),
                },
                conn,
            )

    async def get(self, request_id: str) -> PendingCall | None:
        row = await self._db.one("get_request", {"id": request_id}, unreadable_json=True)
        return PendingCall.from_row(row) if row else None

    async def search(
        self, status: RequestStatus | None = None, limit: int = 200
    ) -> list[PendingCall]:
        rows = await self._db.all(
            "list_requests",
            {"status": status.value if status else None, "limit": limit},
            unreadable_json=True,
        )
        return [PendingCall.from_row(r) for r in rows]

    async def decision_of(self, request_id: str) -> tuple[str, DecisionRecord | None]:
        """The decision made on a request, if any."""
        row = await self._db.one("request_decision", {"id": request_id})
        return request_id, DecisionRecord.from_row(row) if row else None

    async def pending_page(
        self,
        viewer: Viewer,
        *,
        scope: Scope = Scope.SEE,
        order: PendingOrder = PendingOrder.DEADLINE,
        filters: RequestFilter = EVERY_REQUEST,
        asof: datetime,
        after: tuple[datetime, str] | None = None,
        limit: int = 50,
    ) -> list[PendingCall]:
        """Up to ``limit`` pending requests ``viewer`` may see (``scope``: all of them, those
        it may decide, or those it may only see), in ``order``, after the keyset position
        ``after`` (the last row's sort key and id)."""
        params = list_params(viewer, filters, asof, after, limit) | {"decidable": _DECIDABLE[scope]}
        if order is PendingOrder.DEADLINE:
            rows = await custom_planned(self._db, "pending_by_deadline", params, uuids_as_text=True)
        else:
            rows = await custom_planned(self._db, "pending_newest", params, uuids_as_text=True)
        return [PendingCall.from_row(r) for r in rows]

    async def decided_page(
        self,
        viewer: Viewer,
        *,
        filters: RequestFilter = EVERY_REQUEST,
        asof: datetime,
        after: tuple[datetime, str] | None = None,
        limit: int = 50,
    ) -> list[tuple[PendingCall, dict[str, Any]]]:
        """Up to ``limit`` decided (or expired, superseded, cancelled) requests ``viewer`` may
        see, newest decision first, after the keyset position ``after``; each with who decided
        what and the run's and the tool's status since."""
        rows = await custom_planned(
            self._db,
            "decided_page",
            list_params(viewer, filters, asof, after, limit),
        )
        return [
            (
                PendingCall.from_row(row),
                {
                    "kind": row["decision_kind"],
                    "principal": row["decision_principal"],
                    "reason": row["decision_reason"],
                    "run_status": row["run_status"],
                    "execution_status": row["execution_status"],
                },
            )
            for row in rows
        ]

    async def pending_counts(self, viewer: Viewer) -> tuple[int, dict[str, int]]:
        """How many pending requests ``viewer`` may see in all, and per approver group that
        may decide them (a request of several groups counts for each)."""
        rows = await custom_planned(self._db, "pending_counts", viewer.params())
        total = int(rows[0]["total"]) if rows else 0
        return total, {str(r["approver_group"]): int(r["n"]) for r in rows}

    async def votes(self, request_id: str) -> list[str]:
        """Who approved a request that waits for more approvers (the principals), in order."""
        rows = await self._db.all("request_votes", {"id": request_id})
        return [str(r["principal"]) for r in rows]

    async def vote_of(self, request_id: str, person: str | None) -> str | None:
        """The principal ``person`` approved the request as, through any of their principals;
        ``None`` when they have not (or ``person`` is ``None``)."""
        if person is None:
            return None
        row = await self._db.one("person_vote", {"id": request_id, "person": person})
        return str(row["principal"]) if row else None

    async def version(self) -> str:
        """A mark that changes when a request is created or decided."""
        row = await self._db.one("requests_version", {})
        return f"{row['n']}:{row['at']}" if row else ""

    async def for_run(self, run_id: str) -> list[PendingCall]:
        rows = await self._db.all("run_requests", {"run_id": run_id}, unreadable_json=True)
        return [PendingCall.from_row(r) for r in rows]


class PgDecisions:
    """Consumes a pending request exactly once, in one statement."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def decide(
        self,
        request_id: str,
        *,
        kind: DecisionKind,
        principal: str,
        reason: str | None,
        args: dict[str, Any] | None,
        args_identity: str | None,
        check: RequestCheck | None = None,
        override_by: str | None = None,
    ) -> DecisionRecord | Vote:
        params = {
            "id": str(uuid.uuid4()),
            "request_id": request_id,
            "status": KIND_RULES[kind].leaves.value,
            "kind": kind.value,
            "principal": principal,
            "reason": reason,
            "args": json(args) if args is not None else None,
            "args_identity": args_identity,
            "quorum_met": False,
            "override_by": override_by,
        }
        if check is None:
            # Nothing to read under the row lock first: ``decide`` is one statement, all or
            # nothing by itself (autocommit), so no BEGIN and COMMIT around it (two round
            # trips of an operator's decision). Only a refusal goes on, in a transaction:
            # why it was refused, or the vote of a request that needs several approvers.
            row = await self._db.one("decide", params)
            if row is not None:
                return DecisionRecord.from_row(row)
        async with self._db.transaction() as conn:
            if check is not None:
                # Who may decide is read under the request's row lock, in the transaction
                # that consumes it: an escalation (new approver groups) either committed before
                # and is judged here, or waits until this decision is made.
                locked = await self._db.one(
                    "lock_request_row", {"id": request_id}, conn, unreadable_json=True
                )
                if locked is None:
                    raise RequestNotFound(request_id)
                check(PendingCall.from_row(locked))
                row = await self._db.one("decide", params, conn)
                if row is not None:
                    return DecisionRecord.from_row(row)
            state = await self._db.one("request_status", {"id": request_id}, conn)
            if state is None:
                raise RequestNotFound(request_id)
            live = state["status"] == RequestStatus.PENDING and not state["expired"]
            if live and counts_as_vote(request_id, kind, state["quorum"]):
                return await self._vote(params, conn)
        expired = state["status"] == RequestStatus.PENDING and state["expired"]
        raise RequestNotPending(request_id, "expired" if expired else state["status"])

    async def _vote(self, params: dict[str, Any], conn: Connection) -> DecisionRecord | Vote:
        """An approval of a request with a quorum, under the request's row lock: counted once
        per person (not per principal: a person's token and web account are one approver), and
        the one that completes the quorum consumes the request."""
        request_id = params["request_id"]
        state = await self._db.one("lock_request", {"id": request_id}, conn)
        if state is None:
            raise RequestNotFound(request_id)
        if state["status"] != RequestStatus.PENDING or state["expired"]:
            status = "expired" if state["status"] == RequestStatus.PENDING else state["status"]
            raise RequestNotPending(request_id, status)
        counted = await self._db.one(
            "vote",
            {
                "request_id": request_id,
                "principal": params["principal"],
                "run_id": state["run_id"],
                "call_id": state["call_id"],
                "override_by": params["override_by"],
            },
            conn,
        )
        assert counted is not None, "vote returned no row"
        if counted["person"] is None:
            raise NotAllowed(
                request_id,
                f"{params['principal']} is a service token (it has no owner): it may start"
                " runs but never decide",
            )
        if not counted["counted"]:
            raise AlreadyVoted(request_id, counted["earlier"])
        approvals = int(counted["approvals"])
        if approvals < state["quorum"]:
            return Vote(
                request_id=request_id,
                principal=params["principal"],
                approvals=approvals,
                quorum=state["quorum"],
            )
        row = await self._db.one("decide", {**params, "quorum_met": True}, conn)
        assert row is not None, "a locked, pending request was not consumed"
        return DecisionRecord.from_row(row)
