"""The JSON API's bodies: what ``/api/v1`` takes (decisions, cancellations, runs to start) and
what it answers (requests, decisions, runs, their reports, pages of them), as pydantic models,
so that the OpenAPI document describes every field. Text an approver sends is checked to be
storable (no NUL, no lone surrogate) before anything reads it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError, to_json

from approvals.errors import InvalidValue
from approvals.grants import SHOWN_KEY, Offer
from approvals.json_values import check_json
from approvals.listing import (
    DEFAULT_PAGE,
    MAX_AGE,
    MAX_CURSOR,
    MAX_FILTER_TEXT,
    MAX_PAGE,
    PendingOrder,
    RequestFilter,
    Scope,
)
from approvals.model import PendingCall, Run, RunStatus

MAX_REASON = 2000


def storable(field: str) -> AfterValidator:
    """A body field refused as ``approvals.json_values`` refuses it (NUL, lone surrogates, NaN,
    nesting too deep): a 422 naming the field, before any handler reads or writes anything."""

    def check(value: Any) -> Any:
        try:
            check_json(field, value)
        except InvalidValue as exc:
            raise PydanticCustomError("invalid_value", "{message}", {"message": str(exc)}) from None
        return value

    return AfterValidator(check)


Reason = Annotated[str, Field(max_length=MAX_REASON), storable("reason")]
ThreadId = Annotated[str, Field(min_length=1, max_length=200), storable("thread_id")]
#: A human's answer in the tool's place (a respond decision): what the model receives.
Answer = Annotated[str, Field(max_length=MAX_REASON), storable("message")]


class PendingCallView(BaseModel):
    """A pending call as an approver sees it: the shown parameters, never the run's state."""

    id: str
    run_id: str
    call_id: str
    tool: str
    description: str | None
    reason: str | None
    args: dict[str, Any] | None
    args_schema: dict[str, Any]
    requested_by: str
    status: str
    created_at: datetime
    expires_at: datetime
    approvers: list[str]
    allow_edit: bool
    #: The decisions this request offers (approve, edit, reject, respond).
    allowed_decisions: list[str]
    #: What deciding it ``always`` would cover (``approvals.grants``: the rule and its bounds);
    #: null where its rule does not allow it.
    allow_always: dict[str, Any] | None
    quorum: int
    may_decide: bool


class DecisionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: A verdict (``approvals.decision_kinds.Ruling``; an edit is an approve with ``args``),
    #: spelled out so that the OpenAPI document lists it in place (the enum would be a schema of
    #: its own). tests/unit/test_api_decision_kinds.py holds it to the table.
    decision: Literal["approve", "reject", "respond"]
    reason: Reason | None = None
    args: Annotated[dict[str, Any] | None, storable("args")] = None
    #: With respond only: the answer the model receives as the tool's result.
    message: Answer | None = None
    #: An approval as shown, or a rejection, that also decides the rest of the run's calls of
    #: this tool that its rule escalates within its bounds (a standing grant); only where the
    #: request offers it (``allow_always``).
    always: bool = False


class DecisionOut(BaseModel):
    id: str
    request_id: str
    run_id: str
    call_id: str
    #: The stored kind (``approvals.decision_kinds.DecisionKind``), spelled out as ``DecisionIn``
    #: spells its verdicts, and held to the table by the same test.
    decision: Literal["approve", "reject", "edit", "respond"]
    principal: str
    reason: str | None
    args: dict[str, Any] | None
    args_identity: str | None
    decided_at: datetime


class GrantOut(BaseModel):
    """A standing grant (``approvals.grants.Grant``): an approver's "always" for one tool in
    one run, live until an operator revokes it."""

    id: str
    run_id: str
    tool: str
    rule: str
    decision: Literal["approve", "reject"]
    within: dict[str, Any]
    request_id: str
    granted_by: str
    granted_at: datetime
    uses: int
    revoked_at: datetime | None
    revoked_by: str | None


class CancelIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: Reason | None = None


class CancelOut(BaseModel):
    run_id: str
    status: Literal["cancelled"]
    requests_cancelled: int
    jobs_skipped: int


class RetryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: Reason | None = None


class RetryOut(BaseModel):
    """The run still waits; this many of its failed resumes are queued again."""

    run_id: str
    status: Literal["waiting"]
    jobs_requeued: int


class VoteOut(BaseModel):
    """An approval counted towards the request's quorum; the request still waits."""

    request_id: str
    decision: Literal["vote"]
    principal: str
    approvals: int
    quorum: int


class RunIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    graph: str = Field(min_length=1, max_length=200)
    input: Annotated[dict[str, Any], storable("input")]
    thread_id: ThreadId | None = None


class RunOut(BaseModel):
    run_id: str
    thread_id: str
    status: str
    pending: list[str]
    error: str | None
    answer: str | None


class RunRequest(BaseModel):
    id: str
    call_id: str
    tool: str
    status: str


class RunExecution(BaseModel):
    call_id: str
    tool: str
    status: str
    error: str | None = None


class RunInterception(BaseModel):
    sequence: int
    point: str
    decision: str
    reason: str | None
    interceptor: str | None
    mode: str
    resolved_by: str | None
    identity: str | None
    session_id: str
    at: datetime


class RunReport(BaseModel):
    run_id: str
    thread_id: str
    graph: str
    status: str
    started_by: str
    error: str | None
    answer: str | None
    pending: list[str]
    requests: list[RunRequest]
    tool_executions: list[RunExecution]
    interceptions: list[RunInterception]
    #: Decided, and its resume waits: no live worker serves its graph.
    waiting_for_worker: bool = False


class PendingListing(BaseModel):
    """The query of ``GET /pending``: a page size, the previous page's cursor, and filters."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=DEFAULT_PAGE, ge=1, le=MAX_PAGE)
    cursor: str | None = Field(default=None, max_length=MAX_CURSOR)
    scope: Scope = Scope.SEE
    order: PendingOrder = PendingOrder.DEADLINE
    tool: str | None = Field(default=None, min_length=1, max_length=MAX_FILTER_TEXT)
    #: Calls this approver group may decide.
    group: str | None = Field(default=None, min_length=1, max_length=MAX_FILTER_TEXT)
    #: Calls of this run.
    run: str | None = Field(default=None, min_length=1, max_length=64)
    #: Calls of runs this principal started.
    starter: str | None = Field(default=None, min_length=1, max_length=MAX_FILTER_TEXT)
    #: Asked at least this many seconds ago.
    min_age: int | None = Field(default=None, ge=0, le=int(MAX_AGE.total_seconds()))
    #: Asked at most this many seconds ago.
    max_age: int | None = Field(default=None, ge=0, le=int(MAX_AGE.total_seconds()))

    def filters(self) -> RequestFilter:
        return RequestFilter(
            tool=self.tool,
            group=self.group,
            run_id=self.run,
            starter=self.starter,
            min_age=timedelta(seconds=self.min_age) if self.min_age is not None else None,
            max_age=timedelta(seconds=self.max_age) if self.max_age is not None else None,
        )


class RunListing(BaseModel):
    """The query of ``GET /runs``: a page size, the previous page's cursor, and filters."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=DEFAULT_PAGE, ge=1, le=MAX_PAGE)
    cursor: str | None = Field(default=None, max_length=MAX_CURSOR)
    status: RunStatus | None = None
    graph: str | None = Field(default=None, min_length=1, max_length=MAX_FILTER_TEXT)


class RunSummary(BaseModel):
    run_id: str
    thread_id: str
    graph: str
    status: str
    started_by: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, run: Run) -> RunSummary:
        return cls(
            run_id=run.id,
            thread_id=run.thread_id,
            graph=run.graph,
            status=run.status.value,
            started_by=run.started_by,
            created_at=run.created_at,
            updated_at=run.updated_at,
        )


class PendingCounts(BaseModel):
    """Pending calls you may see: in all, and per approver group that may decide them (a call
    naming several groups counts for each; one naming none for the default group)."""

    total: int
    groups: dict[str, int]


def pending_fields(request: PendingCall, may_decide: bool) -> dict[str, Any]:
    """The fields of ``PendingCallView``, in its order, for ``request``."""
    shown = request.shown
    return {
        "id": request.id,
        "run_id": request.run_id,
        "call_id": request.call_id,
        "tool": request.tool,
        "description": shown.get("description"),
        "reason": request.reason,
        "args": shown.get("args"),
        "args_schema": request.args_schema,
        "requested_by": request.requested_by,
        "status": request.status.value,
        "created_at": request.created_at,
        "expires_at": request.expires_at,
        "approvers": list(request.approvers),
        "allow_edit": request.allow_edit,
        "allowed_decisions": list(request.offered_decisions),
        "allow_always": shown.get(SHOWN_KEY) if Offer.of(shown) and request.quorum == 1 else None,
        "quorum": request.quorum,
        "may_decide": may_decide,
    }


def pending_call(request: PendingCall, may_decide: bool) -> PendingCallView:
    return PendingCallView(**pending_fields(request, may_decide))


def pending_page_json(items: list[tuple[PendingCall, bool]]) -> bytes:
    """An inbox page as ``list[PendingCallView]`` serializes it, byte for byte, without a
    model per row: a page of 500 built 500 models, which FastAPI then serialized, most of the
    listing's CPU after the query. The fields are ``pending_fields``'s (str, datetime, bool,
    int, lists of str, JSON objects), which pydantic writes the same whether a model's schema
    names their types or it infers them (a test compares the two)."""
    return to_json([pending_fields(r, may_decide) for r, may_decide in items])
