"""What the OpenAI host needs from storage: where a paused run's ``RunState`` is kept, how a
resume re-reads a request's decision, and where a thread's SDK session is kept.
``storage.openai_runs.PgOpenAIRunStates`` and ``storage.openai_sessions.PgOpenAISessions`` are
the PostgreSQL adapters; the host finds them in ``GraphDeps.extras`` under ``OPENAI_STATES`` and
``OPENAI_SESSIONS``, and the key the states are sealed with under ``OPENAI_STATE_SEAL``."""

from __future__ import annotations

from typing import Any, Protocol

from graphs.hosts.openai.sealing import StateSeal
from graphs.tool_call.deps import Extra


class StoredState(Protocol):
    """A run's stored ``RunState`` text, its recorded version, the calls it waits on and
    where it stood when it was stored."""

    @property
    def state(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def waiting(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def status(self) -> str: ...
    @property
    def answer(self) -> str | None: ...
    @property
    def error(self) -> str | None: ...


class StoredDecision(Protocol):
    """A request as a resume re-reads it from the database, with its decision."""

    @property
    def call_id(self) -> str: ...
    @property
    def identity(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def state_version(self) -> str | None: ...
    @property
    def kind(self) -> str | None: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def decided_by(self) -> str | None: ...


class OpenAIRunStates(Protocol):
    async def save(
        self,
        *,
        run_id: str,
        agent: str,
        state: str,
        version: str,
        waiting: tuple[tuple[str, str], ...],
        status: str,
        answer: str | None = None,
        error: str | None = None,
    ) -> None:
        """Store the run's state text and version and where the run stands; bind the
        pending requests of ``waiting`` (``(call_id, request_id)``) to ``version``."""
        ...

    async def load(self, run_id: str) -> StoredState | None: ...

    async def decision(self, request_id: str) -> StoredDecision | None: ...

    async def record_refused(
        self,
        *,
        run_id: str,
        request_id: str,
        call_id: str,
        expected: str | None,
        found: str,
        reason: str,
        state_sha256: str,
    ) -> None:
        """Audit a resume refused because the stored state is not the one the run paused
        with (``run.state_tampered``): the version the request was bound to (``expected``),
        the one stored (``found``), why (``reason``, a ``SealCheck`` value or ``unreadable``)
        and the plain SHA-256 of the refused text, to find it again."""
        ...


class OpenAISessions(Protocol):
    """Where the SDK sessions the engine keeps are (``OpenAIAgent(..., session="postgres")``)."""

    def session(self, *, thread_id: str, run_id: str) -> Any:
        """The SDK session (``agents.memory.Session``, ``session_id`` the thread id) of
        ``thread_id``'s conversation; the items it adds are ``run_id``'s."""
        ...


#: Where the host gives the OpenAI runs' state store in ``GraphDeps.extras``.
OPENAI_STATES: Extra[OpenAIRunStates] = Extra("openai.run_states")
#: Where the host gives the key the stored states are sealed with (``sealing.StateSeal``).
OPENAI_STATE_SEAL: Extra[StateSeal] = Extra("openai.state_seal")
#: Where the host gives the SDK sessions it keeps (``session="postgres"``).
OPENAI_SESSIONS: Extra[OpenAISessions] = Extra("openai.sessions")


def openai_extras(
    states: OpenAIRunStates, *, secret: str | bytes, sessions: OpenAISessions | None = None
) -> dict[str, object]:
    """``GraphDeps.extras`` that give the OpenAI host ``states``, sealed under a key derived
    from ``secret`` (the app's secret: every process that resumes runs must share it), and
    the ``sessions`` it keeps, if given."""
    extras: dict[str, object] = {
        OPENAI_STATES.name: states,
        OPENAI_STATE_SEAL.name: StateSeal(secret),
    }
    if sessions is not None:
        extras[OPENAI_SESSIONS.name] = sessions
    return extras
