"""The FastAPI dependencies of the faces, in one place: the engine, the JSON API's caller (a
bearer token's principal), the admitted caller (the same, inside the API gate) and the pages'
signed-in session.

Everything here reads what ``web.app.create_app`` put on ``app.state``; a face declares what it
needs (``engine: EngineDep``, ``principal: Admitted``, ``session: SignedIn``) and never reaches
for ``app.state`` itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request

from approvals.principals import Principal
from web.engine import Engine
from web.errors import ApiError
from web.security import Session, Sessions
from web.settings import Settings


def engine_of(request: Request) -> Engine:
    """The app's engine (opened by its lifespan, or the one a test gave it)."""
    engine: Engine = request.app.state.engine
    return engine


async def _engine(request: Request) -> Engine:
    # async: FastAPI runs a plain function dependency in a thread, for nothing here.
    return engine_of(request)


#: The app's engine, for a handler.
EngineDep = Annotated[Engine, Depends(_engine)]


def settings_of(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def sessions_of(request: Request) -> Sessions:
    sessions: Sessions = request.app.state.sessions
    return sessions


async def bearer(request: Request) -> Principal:
    """The principal of the request's bearer token; 401 otherwise. Cookies do not count here."""
    header = request.headers.get("authorization", "")
    scheme, _, secret = header.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise ApiError(401, "unauthenticated", "a bearer token is required")
    principal = await engine_of(request).accounts.verify_token(secret.strip())
    if principal is None:
        raise ApiError(
            401,
            "unauthenticated",
            "the bearer token is not valid (or was revoked, or its owner's account is disabled)",
        )
    return principal


#: The principal of the request's bearer token (401 without a valid one).
Caller = Annotated[Principal, Depends(bearer)]


def gate_size(settings: Settings) -> int:
    """How many of this process's short API calls (``Admitted``) use the database at once:
    half the pool. The rest of the pool stays free for what must not wait behind them: a run
    starting (its thread's lock, then its step's reads, whose answer the step waits for at
    most the interceptor timeout, 5 s), the in-process worker, the pages."""
    return max(1, settings.pool_max_size // 2)


async def admitted_bearer(request: Request) -> AsyncIterator[Principal]:
    """``bearer``, inside this process's API gate (``gate_size``), held until the handler
    returns. Without it, 100 approvers on one server queued for its 10 pooled connections, the
    pool's queue was 8-9 s deep, and a run started meanwhile waited in the same queue for the
    read of its pre_tool_call decision, past the 5 s it is given: the run failed. Here the
    surplus waits in the gate, before touching anything, and the pool's queue stays short."""
    gate: asyncio.Semaphore = request.app.state.api_gate
    async with gate:
        yield await bearer(request)


#: The principal of a short API call: the bearer token's, within the API gate. Streams, run
#: starts, cancels and retries take ``Caller``: a stream lives for minutes, a start runs its
#: agent's step, and a cancel or retry waits for a step in progress to settle (those three have
#: the engine's own bound, ``RunUseCases._lock_holders`` in web/engine/runs.py); each would
#: hold the gate throughout.
Admitted = Annotated[Principal, Depends(admitted_bearer)]


class LoginRequired(Exception):
    """A page needs a signed-in session and the request has none: the app redirects to the
    sign-in form, which comes back here."""


async def signed_in(request: Request) -> Session:
    # Anything but a GET changes state: it asks the database, never this process's cache, so
    # a session ended a moment ago (sign-out elsewhere, the account disabled) decides nothing.
    session = await sessions_of(request).read(request, fresh=request.method != "GET")
    if session is None:
        raise LoginRequired
    return session


#: The pages' signed-in session (without one, the sign-in form).
SignedIn = Annotated[Session, Depends(signed_in)]
