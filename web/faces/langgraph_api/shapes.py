"""What the LangGraph Server face speaks besides its routes: the API token it reads
(``x-api-key``, as the SDKs send it, or ``Authorization: Bearer``), the error bodies the SDKs
parse (``{"detail", "code"}``, with the status that makes ``langgraph_sdk`` raise its own
exception types), the bodies it takes, and the engine's runs as LangGraph's assistants,
threads and runs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException
from starlette.responses import Response

from approvals.errors import ApprovalsError, InvalidValue
from approvals.model import Run, RunStatus
from approvals.principals import Principal
from web.deps import engine_of
from web.errors import ApiError
from web.faces.api_models import ThreadId, storable
from web.faces.json_bodies import UniqueKeysRoute

#: When this process first listed its assistants: a registered graph has no creation time.
LISTED_AT = datetime.now(UTC)

#: A thread's status, from its latest run's.
THREAD_STATUS: dict[RunStatus, str] = {
    RunStatus.RUNNING: "busy",
    RunStatus.WAITING: "interrupted",
    RunStatus.FAILED: "error",
}

#: A run's status as LangGraph names it.
RUN_STATUS: dict[RunStatus, str] = {
    RunStatus.RUNNING: "running",
    RunStatus.WAITING: "interrupted",
    RunStatus.COMPLETED: "success",
    # A policy stopped it: the run did not do what it was asked.
    RunStatus.BLOCKED: "error",
    RunStatus.FAILED: "error",
    RunStatus.CANCELLED: "interrupted",
}


#: The stream modes this face streams. ``messages-tuple`` sends each AI message whole, as
#: the run's recorded node updates carry it (the engine records no token stream), to whoever
#: may read the run; ``custom`` is accepted (Agent Chat UI asks for it) and sends nothing.
STREAM_MODES = frozenset({"values", "updates", "messages-tuple", "custom"})


def stream_event(kind: str, data: Any) -> bytes:
    """One server-sent event as the SDK reads it."""
    return f"event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def update_event(row: dict[str, Any], readable: bool) -> dict[str, Any]:
    """A node update (a run event) as ``updates`` streams it: ``{node: update}``. Whoever
    may not read the run (an approver) gets only the names of the tools its messages call,
    as ``GET /api/v1/runs/{id}/events`` gives them."""
    data = dict(row.get("data") or {})
    if not readable and isinstance(data.get("messages"), list):
        data["messages"] = [
            {"tool_calls": m.get("tool_calls", [])} for m in data["messages"] if isinstance(m, dict)
        ]
    return {str(row.get("node") or "__step__"): data}


def message_events(row: dict[str, Any], run: Run) -> list[list[dict[str, Any]]]:
    """The AI messages of a node update (a run event) as ``messages-tuple`` streams them:
    ``[message, metadata]`` each, the message as the run's events record it (its text, and
    the names of the tools it calls: ``tool_calls`` hold a name each, no arguments). For
    whoever may read the run only: an approver is never sent a message's text."""
    data = row.get("data")
    messages = data.get("messages") if isinstance(data, dict) else None
    if not isinstance(messages, list):
        return []
    node = str(row.get("node") or "__step__")
    metadata = {"langgraph_node": node, "run_id": run.id, "thread_id": run.thread_id}
    return [
        [
            {
                "type": "ai",
                "content": m.get("content", ""),
                "tool_calls": [{"name": name} for name in m.get("tool_calls") or []],
            },
            metadata,
        ]
        for m in messages
        if isinstance(m, dict)
    ]


def problem(status: int, code: str, message: str) -> JSONResponse:
    """An error as LangGraph's server answers it: ``detail`` (which the SDK raises with) and
    a ``code`` clients may branch on."""
    headers = {"www-authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"detail": message, "code": code}, status_code=status, headers=headers)


def _validation_message(exc: RequestValidationError) -> str:
    first = next(iter(exc.errors()), None)
    if first is None:
        return "invalid input"
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
    return f"{where}: {first.get('msg')}" if where else str(first.get("msg"))


class LangGraphRoute(UniqueKeysRoute):
    """A route of this face: JSON bodies read strictly (``UniqueKeysRoute``), and every
    error answered in LangGraph's shape, whatever raised it (the app's own handlers answer
    outside ``/api/`` with pages)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except ApiError as exc:
                return problem(exc.status, exc.code, exc.message)
            except ApprovalsError as exc:
                error = ApiError.from_error(exc)
                return problem(error.status, error.code, error.message)
            except RequestValidationError as exc:
                return problem(422, "invalid_input", _validation_message(exc))
            except HTTPException as exc:
                # A body FastAPI cannot decode (not UTF-8): invalid input, as any bad body.
                if exc.status_code == 400:
                    return problem(422, "invalid_input", "the request body is not valid JSON")
                return problem(exc.status_code, "http_error", str(exc.detail))

        return handle


async def _token_principal(request: Request) -> Principal:
    secret = request.headers.get("x-api-key", "").strip()
    if not secret:
        scheme, _, rest = request.headers.get("authorization", "").partition(" ")
        secret = rest.strip() if scheme.lower() == "bearer" else ""
    if not secret:
        raise ApiError(
            401, "unauthenticated", "an API token is required (x-api-key, or a bearer token)"
        )
    principal = await engine_of(request).accounts.verify_token(secret)
    if principal is None:
        raise ApiError(
            401,
            "unauthenticated",
            "the API token is not valid (or was revoked, or its owner's account is disabled)",
        )
    return principal


async def _admitted(request: Request) -> AsyncIterator[Principal]:
    # A short call waits in the API gate, as the JSON API's do (web.deps.admitted_bearer).
    gate: asyncio.Semaphore = request.app.state.api_gate
    async with gate:
        yield await _token_principal(request)


#: The caller of a call that may last (a run, a join): its token's principal.
Key = Annotated[Principal, Depends(_token_principal)]
#: The caller of a short call, inside the API gate.
AdmittedKey = Annotated[Principal, Depends(_admitted)]


class Paging(BaseModel):
    model_config = ConfigDict(extra="ignore")

    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=10_000)


class AssistantSearch(Paging):
    graph_id: str | None = None
    name: str | None = None
    metadata: dict[str, Any] | None = None


#: The most a thread's metadata may hold, as JSON text.
MAX_METADATA = 16_384


def _small(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value is not None and len(json.dumps(value, ensure_ascii=False)) > MAX_METADATA:
        raise ValueError(f"must be at most {MAX_METADATA} characters of JSON")
    return value


#: A thread's metadata, or a search's: a JSON object the database can keep.
Metadata = Annotated[dict[str, Any] | None, storable("metadata"), AfterValidator(_small)]


class ThreadCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    thread_id: ThreadId | None = None
    metadata: Metadata = None
    if_exists: Literal["raise", "do_nothing"] = "raise"


class ThreadSearch(Paging):
    metadata: Metadata = None
    values: dict[str, Any] | None = None
    ids: list[str] | None = Field(default=None, max_length=100)
    status: Literal["idle", "busy", "interrupted", "error"] | None = None


class RunCreate(BaseModel):
    """A run to start, or a ``command`` resuming the thread. What LangGraph's server takes
    and this face does not (checkpoints, interrupt_before/after, webhooks, other multitask
    strategies) is refused by name rather than ignored."""

    model_config = ConfigDict(extra="ignore")

    assistant_id: str = Field(min_length=1, max_length=200)
    input: Annotated[dict[str, Any] | None, storable("input")] = None
    command: Annotated[dict[str, Any] | None, storable("command")] = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] = "reject"
    stream_mode: list[str] | str | None = None
    interrupt_before: Any = None
    interrupt_after: Any = None
    webhook: str | None = None
    checkpoint: dict[str, Any] | None = None
    checkpoint_id: str | None = None
    after_seconds: int | None = None
    if_not_exists: Literal["reject", "create"] | None = None

    def refuse_unsupported(self) -> None:
        """``InvalidValue`` naming the first field this face does not honour."""
        if self.multitask_strategy != "reject":
            raise InvalidValue("multitask_strategy", "only reject is supported")
        for name in ("interrupt_before", "interrupt_after", "webhook", "checkpoint"):
            if getattr(self, name):
                raise InvalidValue(name, "is not supported by this server")
        if self.checkpoint_id or self.after_seconds:
            raise InvalidValue("checkpoint_id", "runs start from the thread's latest state")
        if self.input is not None and self.command is not None:
            raise InvalidValue("command", "give input or a command, not both")

    def stream_modes(self) -> frozenset[str]:
        """The stream modes asked for (``values`` by default); ``InvalidValue`` for one this
        face cannot stream (see ``STREAM_MODES``)."""
        given = self.stream_mode or ["values"]
        modes = frozenset([given] if isinstance(given, str) else given)
        unknown = sorted(modes - STREAM_MODES)
        if unknown:
            raise InvalidValue("stream_mode", f"{unknown[0][:40]!r} is not streamed here")
        return modes

    def run_input(self) -> dict[str, Any]:
        """The engine's run input: the graph's own input, with ``context`` and the config's
        ``configurable`` beside it (``graphs.run.input``)."""
        if self.input is None:
            raise InvalidValue("input", "a run needs input (or a command resuming the thread)")
        given = dict(self.input)
        if self.context:
            given["context"] = self.context
        configurable = (self.config or {}).get("configurable")
        if configurable:
            given["configurable"] = configurable
        return given


def assistant(name: str) -> dict[str, Any]:
    """A registered graph or agent as a LangGraph assistant: its id and graph are its name."""
    at = LISTED_AT.isoformat()
    return {
        "assistant_id": name,
        "graph_id": name,
        "name": name,
        "description": None,
        "config": {},
        "context": {},
        "metadata": {"created_by": "system"},
        "version": 1,
        "created_at": at,
        "updated_at": at,
    }


def thread(
    thread_id: str,
    run: Run | None,
    state: dict[str, Any] | None = None,
    *,
    metadata: dict[str, Any] | None = None,
    created: datetime | None = None,
) -> dict[str, Any]:
    """A thread: its latest run's status, and (given ``state``) its values and interrupts;
    ``metadata``: what the thread keeps (else its run's ``graph_id`` and ``assistant_id``);
    ``created``: when a thread without runs was created."""
    now = (created or datetime.now(UTC)).isoformat()
    interrupts = (state or {}).get("interrupts", [])
    if metadata is None:
        metadata = {"graph_id": run.graph, "assistant_id": run.graph} if run else {}
    return {
        "thread_id": thread_id,
        "created_at": run.created_at.isoformat() if run else now,
        "updated_at": run.updated_at.isoformat() if run else now,
        "metadata": metadata,
        "status": THREAD_STATUS.get(run.status, "idle") if run else "idle",
        "values": (state or {}).get("values", {}),
        "interrupts": {i["id"]: [i] for i in interrupts},
    }


def thread_state(thread_id: str, state: dict[str, Any]) -> dict[str, Any]:
    """``GET /threads/{id}/state``: one task per waiting interrupt, holding it."""
    checkpoint = {
        "thread_id": thread_id,
        "checkpoint_ns": "",
        "checkpoint_id": state["checkpoint_id"],
        "checkpoint_map": None,
    }
    tasks = [
        {
            "id": interrupt["id"],
            "name": "tools",
            "path": [],
            "error": None,
            "interrupts": [interrupt],
            "checkpoint": None,
            "state": None,
            "result": None,
        }
        for interrupt in state["interrupts"]
    ]
    return {
        "values": state["values"],
        "next": state["next"] or (["tools"] if tasks else []),
        "checkpoint": checkpoint,
        "metadata": {},
        "created_at": None,
        "parent_checkpoint": None,
        "tasks": tasks,
        "interrupts": state["interrupts"],
    }


def run_record(run: Run, *, status: str | None = None) -> dict[str, Any]:
    """A run as LangGraph's ``Run``."""
    return {
        "run_id": run.id,
        "thread_id": run.thread_id,
        "assistant_id": run.graph,
        "created_at": run.created_at.isoformat(),
        "updated_at": run.updated_at.isoformat(),
        "status": status or RUN_STATUS[run.status],
        "metadata": {},
        "multitask_strategy": "reject",
        "kwargs": {},
    }


def wait_result(run: Run, state: dict[str, Any], readable: bool) -> dict[str, Any]:
    """What ``runs.wait`` and ``runs.join`` answer: the thread's values, with the interrupts
    waiting (``__interrupt__``) and, for whoever may read the run, its error
    (``__error__``)."""
    out = dict(state["values"]) if isinstance(state["values"], dict) else {}
    if state["interrupts"]:
        out["__interrupt__"] = state["interrupts"]
    if readable and run.status in (RunStatus.FAILED, RunStatus.BLOCKED) and run.error:
        out["__error__"] = {"error": run.status.value, "message": run.error}
    return out
