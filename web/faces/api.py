"""The JSON API under ``/api/v1``, for programmatic approvers and services (bearer tokens).

Every error is ``{"error": {"code", "message"}}`` with a status that says what happened: 401
without a valid token, 404 for a request or run the caller may not see (exactly as for one that
does not exist, malformed ids included), 403 for one it may see but not decide (or cancel), 409
when the request is no longer pending or the run already ended, 422 for invalid input. Bad input
never answers 500.
"""

from __future__ import annotations

import logging
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from approvals.errors import (
    InvalidRequestId,
    InvalidRunId,
    RequestNotFound,
    RunNotFound,
)
from approvals.model import PendingCall, Run, Vote
from approvals.principals import Principal
from web.deps import Admitted, Caller, EngineDep
from web.engine import Engine
from web.engine.workers import report_waits_for_worker
from web.errors import ERROR_RESPONSES, ApiError, ErrorBody
from web.faces.api_models import (
    CancelIn,
    CancelOut,
    DecisionIn,
    DecisionOut,
    GrantOut,
    PendingCallView,
    PendingCounts,
    PendingListing,
    RetryIn,
    RetryOut,
    RunIn,
    RunListing,
    RunOut,
    RunReport,
    RunSummary,
    VoteOut,
    pending_call,
    pending_page_json,
)
from web.faces.json_bodies import UniqueKeysRoute
from web.faces.request_stream import open_stream as open_request_stream
from web.faces.run_stream import parse_after
from web.faces.run_stream import run_events as stream_run_events

log = logging.getLogger("approvals.web")


def next_link(request: Request, cursor: str) -> str:
    """The ``Link`` header of the next page: this request's path and query, with ``cursor``."""
    query = [(k, v) for k, v in request.query_params.multi_items() if k != "cursor"]
    return f'<{request.url.path}?{urlencode([*query, ("cursor", cursor)])}>; rel="next"'


async def visible_request(engine: Engine, request_id: str, principal: Principal) -> PendingCall:
    """The request, if ``principal`` may see it; 404 in every other case."""
    try:
        return await engine.visible_request(request_id, principal)
    except (InvalidRequestId, RequestNotFound) as exc:
        # Hidden, unknown and malformed ids get the same answer.
        raise ApiError(404, "not_found", "no such request") from exc


async def visible_run(engine: Engine, run_id: str, principal: Principal) -> Run:
    """The run, if ``principal`` may see it; 404 in every other case (malformed ids too)."""
    try:
        return await engine.visible_run(run_id, principal)
    except RunNotFound as exc:
        raise ApiError(404, "not_found", "no such run") from exc


#: The JSON API: every route under ``/api/v1``, documented with the errors it may answer.
router = APIRouter(prefix="/api/v1", responses=ERROR_RESPONSES, route_class=UniqueKeysRoute)


@router.get(
    "/pending",
    response_model=list[PendingCallView],
    summary="Pending calls you may see, one page at a time",
)
async def list_pending(
    request: Request,
    principal: Admitted,
    listing: Annotated[PendingListing, Query()],
    engine: EngineDep,
) -> Response:
    """Soonest deadline first (``order=newest``: newest first). ``scope=decide`` keeps
    those you may decide, ``scope=others`` those you may only see. When there is more, the
    ``Link`` header holds the next page's URL (``rel="next"``, RFC 8288): the same query
    with a ``cursor``. A cursor from another query is refused with 422."""
    page = await engine.pending_page(
        principal,
        scope=listing.scope,
        order=listing.order,
        filters=listing.filters(),
        cursor=listing.cursor,
        limit=listing.limit,
    )
    # Serialized here, not by FastAPI from one model per row (see pending_page_json); the
    # response_model above still documents it.
    response = Response(pending_page_json(page.items), media_type="application/json")
    if page.next_cursor is not None:
        response.headers["Link"] = next_link(request, page.next_cursor)
    return response


@router.get(
    "/pending/counts",
    response_model=PendingCounts,
    summary="How many pending calls you may see, per approver group",
)
async def pending_counts(principal: Admitted, engine: EngineDep) -> PendingCounts:
    total, groups = await engine.pending_counts(principal)
    return PendingCounts(total=total, groups=groups)


@router.get(
    "/pending/events",
    summary="Changes of the requests you may see, as they happen (server-sent events)",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {}}},
        429: {"model": ErrorBody, "description": "You already hold 16 streams here"},
    },
)
async def pending_events(
    request: Request, principal: Caller, engine: EngineDep
) -> StreamingResponse:
    """``request`` (``{id, run_id, tool, kind, status}``: a request you may see, or of a
    run you started, was opened, decided, expired, escalated, superseded or cancelled),
    ``resync`` (changes may have been missed: list again) and ``signed-out`` (the token
    was revoked or its groups changed; checked every 15 s). Pushed from one LISTEN
    connection per server process: following it costs the database nothing."""
    secret = request.headers["authorization"].partition(" ")[2].strip()

    async def still_signed_in() -> bool:
        return await engine.accounts.verify_token(secret) == principal

    return await open_request_stream(engine, principal, still_signed_in)


@router.get("/pending/{request_id}", response_model=PendingCallView, summary="One pending call")
async def get_pending(request_id: str, principal: Admitted, engine: EngineDep) -> PendingCallView:
    found = await visible_request(engine, request_id, principal)
    return pending_call(found, engine.rules.may_decide(principal, found))


@router.post(
    "/pending/{request_id}/decision",
    response_model=DecisionOut,
    summary="Approve, reject, approve edited arguments, or respond in the tool's place",
    responses={
        202: {
            "model": VoteOut,
            "description": "Approval counted; the request waits for more approvers",
        }
    },
)
async def decide(
    request_id: str, body: DecisionIn, principal: Admitted, engine: EngineDep
) -> Response:
    try:
        decision = await engine.decide(
            request_id,
            body.decision,
            principal=principal,
            reason=body.reason,
            args=body.args,
            message=body.message,
            always=body.always,
        )
    except (InvalidRequestId, RequestNotFound) as exc:
        # Hidden, unknown and malformed ids get the same answer.
        raise ApiError(404, "not_found", "no such request") from exc
    if isinstance(decision, Vote):
        vote = VoteOut.model_validate(decision.to_json())
        return JSONResponse(vote.model_dump(mode="json"), status_code=202)
    out = DecisionOut.model_validate(decision.to_json())
    return JSONResponse(out.model_dump(mode="json"))


@router.post(
    "/runs",
    response_model=RunOut,
    summary="Start a run as yourself",
    responses={
        503: {
            "model": ErrorBody,
            "description": "The database is unavailable, or this process already starts as"
            " many runs as its pool serves and none ended in APPROVALS_START_WAIT_SECONDS:"
            " nothing was started or written; retry after Retry-After seconds",
            "headers": {
                "Retry-After": {
                    "description": "Seconds to wait before starting again (when too busy)",
                    "schema": {"type": "integer"},
                }
            },
        }
    },
)
async def start_run(body: RunIn, principal: Caller, engine: EngineDep) -> RunOut:
    outcome = await engine.start_run(
        body.graph, body.input, principal=principal, thread_id=body.thread_id
    )
    return RunOut.model_validate(outcome.to_json())


@router.get(
    "/runs", response_model=list[RunSummary], summary="Runs you may see, one page at a time"
)
async def list_runs(
    request: Request,
    response: Response,
    principal: Admitted,
    listing: Annotated[RunListing, Query()],
    engine: EngineDep,
) -> list[RunSummary]:
    """The runs you started, those with a request you may see, or every run for an
    operator; newest first. More pages: the ``Link`` header (``rel="next"``), as for
    ``GET /pending``."""
    page = await engine.runs_page(
        principal,
        status=listing.status,
        graph=listing.graph,
        cursor=listing.cursor,
        limit=listing.limit,
    )
    if page.next_cursor is not None:
        response.headers["Link"] = next_link(request, page.next_cursor)
    return [RunSummary.of(run) for run in page.items]


@router.get("/runs/{run_id}", response_model=RunReport, summary="A run you may see")
async def get_run(run_id: str, principal: Admitted, engine: EngineDep) -> RunReport:
    try:
        report = await engine.report(run_id, viewer=principal)
    except (InvalidRunId, RunNotFound) as exc:
        raise ApiError(404, "not_found", "no such run") from exc
    waiting = await report_waits_for_worker(engine.adapters.db, report)
    return RunReport.model_validate({**report, "waiting_for_worker": waiting})


@router.get(
    "/runs/{run_id}/events",
    summary="A run's events as they happen (server-sent events)",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def run_events(
    request: Request,
    run_id: str,
    principal: Caller,
    engine: EngineDep,
    after: str | None = None,
) -> StreamingResponse:
    """``status`` (the run's status whenever it changes), ``resuming`` (a decision queued
    its resume) and ``update`` (a node finished: its name, the text of the agent's own
    messages and the names of the tools they call; never arguments or tool results). Each
    carries its id: reconnect with ``Last-Event-ID`` (or ``?after=``) for what was missed.
    The stream closes when the run waits for a human or ends."""
    run = await visible_run(engine, run_id, principal)
    after_id = parse_after(request.headers.get("last-event-id", after))
    if after_id is None:
        raise ApiError(422, "invalid_input", "Last-Event-ID must be an event id")
    # Subscribed before the response starts (and before the first read): a database that
    # is gone answers 503, not a stream cut short.
    sub = await engine.streams.subscribe(run.id)

    async def status() -> str | None:
        now = await engine.runs.get(run.id)
        return now.status.value if now is not None else None

    return StreamingResponse(
        stream_run_events(
            engine.run_events,
            sub,
            run,
            after_id,
            status,
            content=engine.rules.may_read_run(principal, run),
        ),
        media_type="text/event-stream",
        # Proxies must pass each event on as it comes.
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


@router.post(
    "/runs/{run_id}/cancel",
    response_model=CancelOut,
    summary="Cancel a running or waiting run (its starter, or an operator)",
)
async def cancel_run(
    run_id: str, principal: Caller, engine: EngineDep, body: CancelIn | None = None
) -> CancelOut:
    try:
        cancelled = await engine.cancel_run(
            run_id, by=principal, reason=body.reason if body else None
        )
    except (InvalidRunId, RunNotFound) as exc:
        raise ApiError(404, "not_found", "no such run") from exc
    return CancelOut.model_validate(cancelled.to_json())


@router.post(
    "/runs/{run_id}/retry",
    response_model=RetryOut,
    summary="Queue again the failed resumes of a waiting run (an operator)",
)
async def retry_run(
    run_id: str, principal: Caller, engine: EngineDep, body: RetryIn | None = None
) -> RetryOut:
    try:
        retried = await engine.retry_run(run_id, by=principal, reason=body.reason if body else None)
    except (InvalidRunId, RunNotFound) as exc:
        raise ApiError(404, "not_found", "no such run") from exc
    return RetryOut.model_validate(retried.to_json())


@router.get(
    "/runs/{run_id}/grants",
    response_model=list[GrantOut],
    summary="A run's standing grants, live and revoked (an operator)",
)
async def list_grants(run_id: str, principal: Admitted, engine: EngineDep) -> list[GrantOut]:
    try:
        grants = await engine.grants_of(run_id, by=principal)
    except (InvalidRunId, RunNotFound) as exc:
        raise ApiError(404, "not_found", "no such run") from exc
    return [GrantOut.model_validate(grant.to_json()) for grant in grants]


@router.post(
    "/grants/{grant_id}/revoke",
    response_model=GrantOut,
    summary="Revoke a standing grant: the calls it covered ask again (an operator)",
)
async def revoke_grant(grant_id: str, principal: Admitted, engine: EngineDep) -> GrantOut:
    grant = await engine.revoke_grant(grant_id, by=principal)
    return GrantOut.model_validate(grant.to_json())
