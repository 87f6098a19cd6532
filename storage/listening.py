"""One LISTEN connection per process, kept up: what the run-event and request-event hubs share.

``Listener`` connects on first use, LISTENs with the given statements (their SQL text), hands every
notification to ``on_notify``, and when the connection drops calls ``on_lost`` (whatever was
published meanwhile was not heard) and connects again every ``retry_seconds`` until it can."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import psycopg

from approvals.errors import DatabaseUnavailable
from storage.db import translated_errors

log = logging.getLogger("approvals.storage")


class Listener:
    def __init__(
        self,
        url: str,
        statements: Sequence[str],
        *,
        on_notify: Callable[[psycopg.Notify], Awaitable[None]],
        on_lost: Callable[[], None],
        name: str,
        retry_seconds: float = 1.0,
    ) -> None:
        self._url = url
        self._statements = tuple(statements)
        self._on_notify = on_notify
        self._on_lost = on_lost
        self._name = name
        self._retry = retry_seconds
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """Listen, unless already listening; ``DatabaseUnavailable`` when it cannot (so a
        request fails before its stream starts)."""
        async with self._lock:
            if self._task is None or self._task.done():
                conn = await self._connect()
                self._task = asyncio.create_task(self._listen(conn), name=self._name)

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        with translated_errors():
            conn = await psycopg.AsyncConnection.connect(
                self._url, autocommit=True, connect_timeout=10
            )
            try:
                for statement in self._statements:
                    await conn.execute(statement)
            except BaseException:
                await conn.close()
                raise
        return conn

    async def _listen(self, conn: psycopg.AsyncConnection[Any] | None) -> None:
        while True:
            if conn is not None:
                try:
                    async for notify in conn.notifies():
                        await self._on_notify(notify)
                except (psycopg.Error, OSError) as exc:
                    log.warning("%s: lost the listening connection (%s)", self._name, exc)
                finally:
                    await conn.close()
                self._on_lost()
            await asyncio.sleep(self._retry)
            try:
                conn = await self._connect()
            except DatabaseUnavailable as exc:
                log.warning("%s: cannot listen (%s); retrying", self._name, exc)
                conn = None

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
