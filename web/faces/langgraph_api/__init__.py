"""A LangGraph Server API face under ``/langgraph``: enough of LangGraph Platform's HTTP API
that ``langgraph_sdk.get_client(url=".../langgraph", api_key=TOKEN)`` drives the engine's runs
(docs/langgraph-server.md).

Assistants are the registered graphs and agents, by name. A thread is the engine's thread: it
exists once it is created (kept with its metadata, ``web.engine.threads``) or a run is started
on it, and a principal sees it when it may see its latest run (404 otherwise), or, while it
holds no run, when it created it. A run is the engine's run; a ``command`` resuming a thread
is a decision by the token's principal, decided by ``Engine.decide`` with every approver rule,
consumed once: the worker resumes the run, and ``runs.wait`` answers when its step settles.
Errors are LangGraph's ``{"detail"}`` with the status that makes the SDK raise its own
exception type.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response, StreamingResponse

from approvals.errors import InvalidValue, RunNotFound, ThreadBusy
from approvals.model import Run, RunStatus, Vote
from approvals.principals import Principal
from web.deps import EngineDep
from web.engine import Engine
from web.engine.threads import StoredThread
from web.errors import ApiError
from web.faces.langgraph_api.shapes import (
    AdmittedKey,
    AssistantSearch,
    Key,
    LangGraphRoute,
    RunCreate,
    ThreadCreate,
    ThreadSearch,
    assistant,
    message_events,
    run_record,
    stream_event,
    thread,
    thread_state,
    update_event,
    wait_result,
)

#: How long ``runs.wait`` and ``runs.join`` wait for a step to settle before answering with
#: the thread as it is.
WAIT_SECONDS = 240.0
#: How many runs a thread search reads at most to find its threads.
SEARCH_RUNS = 2000

#: The LangGraph Server face; its errors are LangGraph's (``LangGraphRoute``).
router = APIRouter(prefix="/langgraph", route_class=LangGraphRoute, include_in_schema=False)


def _not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", f"no such {what}")


async def _thread_run(engine: Engine, thread_id: str, principal: Principal) -> Run | None:
    """The thread's latest run, if ``principal`` may see it (``None``: no run yet); 404."""
    try:
        return await engine.visible_thread(thread_id, principal)
    except RunNotFound as exc:
        raise _not_found("thread") from exc


@router.post("/assistants/search")
async def search_assistants(
    body: AssistantSearch, principal: AdmittedKey, engine: EngineDep
) -> Any:
    names = [
        name
        for name in engine.agent_names()
        if (body.graph_id is None or name == body.graph_id)
        and (body.name is None or name == body.name)
        and all(assistant(name)["metadata"].get(k) == v for k, v in (body.metadata or {}).items())
    ]
    return [assistant(name) for name in names[body.offset : body.offset + body.limit]]


@router.get("/assistants/{assistant_id}")
async def get_assistant(assistant_id: str, principal: AdmittedKey, engine: EngineDep) -> Any:
    if assistant_id not in engine.agent_names():
        raise _not_found("assistant")
    return assistant(assistant_id)


@router.post("/threads")
async def create_thread(body: ThreadCreate, principal: AdmittedKey, engine: EngineDep) -> Any:
    """A new thread, kept with its ``metadata`` (``web.engine.threads``). An id already in
    use (kept, or holding runs) is 409, one answer whoever asks (``if_exists="do_nothing"``:
    the thread, when the caller may see it). A thread the caller may not see is taken all
    the same: the answer says so and nothing else, neither its owner nor its state, nor
    whether it is one the caller could see (thread ids are one namespace; its contents are
    what is hidden)."""
    thread_id = body.thread_id or str(uuid.uuid4())
    if body.thread_id is not None:
        try:
            run = await engine.visible_thread(body.thread_id, principal)
        except RunNotFound as exc:
            raise _taken() from exc
        if run is not None:
            if body.if_exists == "raise":
                raise _taken()
            return thread(thread_id, run, metadata=await _metadata(engine, run))
    kept = await engine.threads.create(thread_id, body.metadata or {}, principal)
    if kept is None and body.if_exists == "do_nothing":
        kept = await engine.threads.own(thread_id, principal)
    if kept is None:
        raise _taken()
    return thread(thread_id, None, metadata=kept.metadata, created=kept.created_at)


async def _metadata(engine: Engine, run: Run) -> dict[str, Any]:
    """The metadata of ``run``'s thread (``run``: its latest, which the caller may see)."""
    found = await engine.threads.metadata([run], {})
    return dict(found.get(run.thread_id) or {})


def _taken() -> ApiError:
    return ApiError(409, "conflict", "a thread with this id exists")


@router.get("/threads/{thread_id}")
async def get_thread(thread_id: str, principal: AdmittedKey, engine: EngineDep) -> Any:
    run = await _thread_run(engine, thread_id, principal)
    if run is None:
        # Kept, with its metadata, for its creator; to anyone else an id like any other.
        kept = await engine.threads.own(thread_id, principal)
        if kept is None:
            return thread(thread_id, None)
        return thread(thread_id, None, metadata=kept.metadata, created=kept.created_at)
    state = await engine.thread_state(run, principal)
    return thread(thread_id, run, state, metadata=await _metadata(engine, run))


@router.get("/threads/{thread_id}/state")
async def get_thread_state(thread_id: str, principal: AdmittedKey, engine: EngineDep) -> Any:
    run = await _thread_run(engine, thread_id, principal)
    if run is None:
        empty: dict[str, Any] = {"values": {}, "next": [], "checkpoint_id": None, "interrupts": []}
        return thread_state(thread_id, empty)
    return thread_state(thread_id, await engine.thread_state(run, principal))


@router.post("/threads/{thread_id}/history")
async def thread_history(thread_id: str, principal: AdmittedKey, engine: EngineDep) -> Any:
    """The thread's states, newest first: its current state only (earlier checkpoints are
    not served)."""
    run = await _thread_run(engine, thread_id, principal)
    if run is None:
        return []
    return [thread_state(thread_id, await engine.thread_state(run, principal))]


@router.post("/threads/search")
async def search_threads(body: ThreadSearch, principal: AdmittedKey, engine: EngineDep) -> Any:
    """Threads ``principal`` may see: the ones it created that hold no run yet, newest
    first, then those with runs, newest first; ``status="interrupted"``: those with a call
    waiting for it to decide. ``metadata`` keeps the threads whose metadata (what their
    creator gave, with ``graph_id`` and ``assistant_id``) contains it."""
    if body.values:
        raise InvalidValue("values", "searching threads by their values is not supported")
    wanted = body.offset + body.limit
    if body.ids is not None:
        runs = [run for i in body.ids if (run := await _seen_thread(engine, i, principal))]
    elif body.status == "interrupted":
        runs = await engine.waiting_threads(principal, wanted)
    else:
        runs = await _latest_runs(engine, principal)
    runs = [run for run in runs if body.status in (None, thread(run.thread_id, run)["status"])]
    found = await engine.threads.metadata(runs, body.metadata or {})
    shown: list[Run | StoredThread] = []
    if body.status in (None, "idle"):
        shown += await engine.threads.own_without_runs(
            principal, body.metadata or {}, body.ids, wanted
        )
    shown += [run for run in runs if run.thread_id in found]
    return [await _found(engine, one, found, principal) for one in shown[body.offset : wanted]]


async def _found(
    engine: Engine, one: Run | StoredThread, found: dict[str, Any], principal: Principal
) -> dict[str, Any]:
    """A thread a search found: a run-less thread kept, or a thread's latest run."""
    if isinstance(one, StoredThread):
        return thread(one.thread_id, None, metadata=one.metadata, created=one.created_at)
    state = await engine.thread_state(one, principal, values=False)
    return thread(one.thread_id, one, state, metadata=found[one.thread_id])


async def _seen_thread(engine: Engine, thread_id: str, principal: Principal) -> Run | None:
    """The thread's latest run if ``principal`` may see it; ``None`` otherwise (a search
    leaves out what it may not see)."""
    try:
        return await engine.visible_thread(thread_id, principal)
    except RunNotFound:
        return None


async def _latest_runs(engine: Engine, principal: Principal) -> list[Run]:
    """The newest run ``principal`` may see of each thread, newest first (at most
    ``SEARCH_RUNS`` runs read)."""
    latest: dict[str, Run] = {}
    cursor: str | None = None
    for _ in range(SEARCH_RUNS // 500):
        page = await engine.runs_page(principal, cursor=cursor, limit=500)
        for run in page.items:
            latest.setdefault(run.thread_id, run)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    return list(latest.values())


async def _resume(
    engine: Engine, thread_id: str, command: dict[str, Any], principal: Principal
) -> tuple[Run, int, bool]:
    """A command's resume, decided by ``principal``: the run, its latest event before the
    decisions, and whether they complete it (a vote towards a quorum does not)."""
    other = sorted(set(command) - {"resume"})
    if other:
        # Refused for operators too: a jump or a state edit would run past the governed
        # step, and no rule of the engine's says who may.
        raise InvalidValue(f"command.{other[0]}", "is not supported: send command.resume only")
    if "resume" not in command:
        raise InvalidValue("command", "must hold resume")
    run, mark, decided = await engine.resume_thread(
        thread_id, command["resume"], principal=principal
    )
    return run, mark, not any(isinstance(d, Vote) for d in decided)


async def _start(
    engine: Engine, thread_id: str, body: RunCreate, principal: Principal, *, background: bool
) -> Run:
    """A new run on the thread; a thread whose latest run runs or waits is busy (409)."""
    given = body.run_input()
    latest = await _thread_run(engine, thread_id, principal)
    if latest is not None and latest.status in (RunStatus.RUNNING, RunStatus.WAITING):
        raise ThreadBusy(thread_id)
    if latest is None and await engine.threads.kept_by_another(thread_id, principal):
        # Another's thread: its first run would hand this caller its metadata.
        raise _not_found("thread")
    if background:
        return await engine.start_in_background(
            body.assistant_id, given, principal=principal, thread_id=thread_id
        )
    outcome = await engine.start_run(
        body.assistant_id, given, principal=principal, thread_id=thread_id
    )
    return await engine.visible_run(outcome.run_id, principal)


async def _answer(engine: Engine, run: Run, principal: Principal) -> JSONResponse:
    """The thread's values after ``run``'s step, as ``runs.wait`` answers them."""
    state = await engine.thread_state(run, principal)
    readable = engine.rules.may_read_run(principal, run)
    location = f"/langgraph/threads/{run.thread_id}/runs/{run.id}"
    return JSONResponse(wait_result(run, state, readable), headers={"Content-Location": location})


@router.post("/threads/{thread_id}/runs/wait")
async def wait_run(thread_id: str, body: RunCreate, principal: Key, engine: EngineDep) -> Any:
    """Start a run, or resume the thread with ``command``, and answer once its step settles
    (the run waits for a human, or it is over)."""
    body.refuse_unsupported()
    if body.command is not None:
        run, mark, complete = await _resume(engine, thread_id, body.command, principal)
        if complete:
            run = await engine.await_settled(run.id, mark, WAIT_SECONDS)
    else:
        run = await _start(engine, thread_id, body, principal, background=False)
    return await _answer(engine, run, principal)


@router.post("/runs/wait")
async def wait_stateless_run(body: RunCreate, principal: Key, engine: EngineDep) -> Any:
    """A run on a thread of its own (kept: read it back by the run's thread id)."""
    body.refuse_unsupported()
    if body.command is not None:
        raise InvalidValue("command", "a command resumes a thread: send it to the thread")
    run = await _start(engine, str(uuid.uuid4()), body, principal, background=False)
    return await _answer(engine, run, principal)


@router.post("/threads/{thread_id}/runs")
async def create_run(thread_id: str, body: RunCreate, principal: Key, engine: EngineDep) -> Any:
    """Start a run, or resume the thread with ``command``, in the background."""
    body.refuse_unsupported()
    if body.command is not None:
        run, _, _ = await _resume(engine, thread_id, body.command, principal)
        return run_record(run, status="pending")
    return run_record(await _start(engine, thread_id, body, principal, background=True))


async def _thread_run_by_id(
    engine: Engine, thread_id: str, run_id: str, principal: Principal
) -> Run:
    try:
        run = await engine.visible_run(run_id, principal)
    except RunNotFound as exc:
        raise _not_found("run") from exc
    if run.thread_id != thread_id:
        raise _not_found("run")
    return run


@router.get("/threads/{thread_id}/runs/{run_id}")
async def get_run(thread_id: str, run_id: str, principal: AdmittedKey, engine: EngineDep) -> Any:
    return run_record(await _thread_run_by_id(engine, thread_id, run_id, principal))


@router.post("/threads/{thread_id}/runs/{run_id}/cancel", status_code=202)
async def cancel_run(
    thread_id: str,
    run_id: str,
    principal: Key,
    engine: EngineDep,
    wait: bool = False,
    action: str = "interrupt",
) -> Response:
    """Cancel the run (its starter, or an operator): its pending calls are cancelled and
    nothing of them runs. ``action=rollback`` (deleting the run) is not supported."""
    if action != "interrupt":
        raise InvalidValue("action", "only interrupt is supported: a run's record is kept")
    run = await _thread_run_by_id(engine, thread_id, run_id, principal)
    await engine.cancel_run(run.id, by=principal)
    return Response(status_code=200 if wait else 202)


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_run(thread_id: str, run_id: str, principal: Key, engine: EngineDep) -> Any:
    """The thread's values once the run's step in progress settles."""
    run = await _thread_run_by_id(engine, thread_id, run_id, principal)
    return await _answer(engine, await engine.join_run(run.id, WAIT_SECONDS), principal)


@router.post("/threads/{thread_id}/runs/stream")
async def stream_run(
    thread_id: str, body: RunCreate, principal: Key, engine: EngineDep
) -> StreamingResponse:
    """Start a run, or resume the thread with ``command``, and stream its step as
    server-sent events in the SDK's names: ``metadata`` first, ``updates`` (each node's
    update as the run's events record it) and ``messages`` (``messages-tuple``: the AI
    messages those updates carry, for whoever may read the run) as they come, and ``values``
    (the thread's values once the step settles, with the interrupts waiting)."""
    body.refuse_unsupported()
    modes = body.stream_modes()
    if body.command is not None:
        run, mark, complete = await _resume(engine, thread_id, body.command, principal)
    else:
        run = await _start(engine, thread_id, body, principal, background=True)
        mark, complete = 0, True
    return StreamingResponse(
        _streamed(engine, run, mark if complete else None, modes, principal),
        media_type="text/event-stream",
        # Proxies must pass each event on as it comes.
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _streamed(
    engine: Engine, run: Run, after: int | None, modes: frozenset[str], principal: Principal
) -> AsyncIterator[bytes]:
    """The events of ``run``'s step after event ``after`` (``None``: no step follows, the
    decision was a vote towards a quorum), then the thread's values."""
    readable = engine.rules.may_read_run(principal, run)
    yield stream_event("metadata", {"run_id": run.id, "attempt": 1})
    if after is not None:
        async for row in engine.step_events(run.id, after, WAIT_SECONDS):
            if row["kind"] != "update":
                continue
            if "updates" in modes:
                yield stream_event("updates", update_event(row, readable))
            if "messages-tuple" in modes and readable:
                for pair in message_events(row, run):
                    yield stream_event("messages", pair)
    now = await engine.visible_run(run.id, principal)
    state = await engine.thread_state(now, principal)
    if "values" in modes:
        yield stream_event("values", wait_result(now, state, readable))
    elif "updates" in modes and state["interrupts"]:
        yield stream_event("updates", {"__interrupt__": state["interrupts"]})
