"""The worker's health probe (``approvals worker --health-port PORT``): liveness and readiness
over HTTP, for an orchestrator to restart a wedged worker and to hold back traffic until a new
one is ready.

- ``GET /healthz``, liveness: 200 while the worker's loops run; 503 once one of them ended
  (the process is on its way out). Never touches the database.
- ``GET /readyz``, readiness: 200 when the database answers within the deadline with the schema
  this code needs and the worker's loops run, with the graphs this worker resumes and the
  digest of their configuration (``{"status": "ready", "graphs": [...], "config_digest":
  ...}``); 503 with the reason otherwise.

Nothing else is served (404), and nothing here needs a session or a token: it says no more than
whether this worker can work, and which graphs it serves. Bind it to an address only the
orchestrator reaches (the default is 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from web.engine import Engine
from web.engine.readiness import schema_or_problem

#: How long readiness waits for the database before it answers "not ready".
READY_TIMEOUT_SECONDS = 2.0


@dataclass
class WorkerState:
    """Whether the worker's loops run: set by the worker command, read by the probe."""

    running: bool = False
    stopped_because: str | None = None
    graphs: tuple[str, ...] = field(default_factory=tuple)
    #: The registration's digest (``GraphRegistry.config_digest``): workers and web processes
    #: with the same one serve the same graphs.
    config_digest: str = ""


def probe_app(engine: Engine, state: WorkerState) -> FastAPI:
    """The probe's two routes, over ``engine`` and the worker's ``state``."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        if state.stopped_because is not None:
            return JSONResponse({"status": "stopped", "reason": state.stopped_because}, 503)
        return JSONResponse({"status": "ok"})

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        reason = await _not_ready_because(engine, state)
        if reason is not None:
            return JSONResponse({"status": "unavailable", "reason": reason}, 503)
        return JSONResponse(
            {"status": "ready", "graphs": list(state.graphs), "config_digest": state.config_digest}
        )

    return app


async def _not_ready_because(engine: Engine, state: WorkerState) -> str | None:
    if state.stopped_because is not None:
        return f"the worker stopped: {state.stopped_because}"
    if not state.running:
        return "the worker has not started"
    _, problem = await schema_or_problem(engine, READY_TIMEOUT_SECONDS)
    return problem


@asynccontextmanager
async def probe_serving(
    engine: Engine, state: WorkerState, sock: socket.socket
) -> AsyncIterator[None]:
    """The probe served on ``sock`` for the life of the block."""
    config = uvicorn.Config(
        probe_app(engine, state), log_config=None, access_log=False, lifespan="off"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            await task  # raises what stopped it
            raise RuntimeError("the worker's health probe stopped while starting")
        await asyncio.sleep(0.02)
    try:
        yield
    finally:
        server.should_exit = True
        await task
