"""The composition root: ``open_engine`` builds the pool and every adapter once, and the
``Engine`` on them; nothing else builds one. Also what a process does around it: migrate the
schema first (``upgrade``), and freeze what a long-running process keeps (``freeze_heap``)."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from storage.db import open_database
from web.engine.adapters import build_adapters
from web.engine.engine import Engine
from web.settings import Settings

log = logging.getLogger("approvals.engine")


async def upgrade(url: str, *, runtime_role: str | None = None) -> None:
    """Apply the schema's migrations at ``url`` (``storage.migrate.upgrade``): the web app at
    startup, ``approvals db upgrade`` and the commands that migrate first."""
    # Imported here, not at the top: Alembic and LangGraph's checkpointer take a few hundred
    # milliseconds to import, and only what migrates needs them.
    from storage.migrate import upgrade as migrate

    await migrate(url, runtime_role=runtime_role)


@asynccontextmanager
async def open_engine(url: str, settings: Settings | None = None) -> AsyncIterator[Engine]:
    """The engine on the database at ``url`` (already upgraded), for the life of the block.

    Raises ``DatabaseUnavailable`` at once when the server cannot be reached."""
    settings = settings or Settings(database_url=url)
    async with open_database(url, max_size=settings.pool_max_size) as db:
        engine = Engine(build_adapters(url, settings, db))
        try:
            yield engine
        finally:
            await engine.close()


def freeze_heap(engine: Engine) -> None:
    """For a long-running process (``approvals serve``, ``approvals worker``), once it is up:
    build what it keeps for its life (the graphs, which import LangGraph), collect, then move
    every object alive into the garbage collector's permanent generation (``gc.freeze``).

    Python's full collection walks every object the process holds, and it comes as often as
    a quarter of that count survives a younger collection: an inbox page of 500 requests
    makes some 10,000 objects, so every few pages a collection walked the 160,000 objects of
    the imported app and LangGraph (tens of milliseconds each, a quarter of a listing's CPU
    under the HTTP load bench). Frozen, they are never walked again; objects made later are
    collected as before. What fails while building the graphs is left to the first run that
    needs them, as without this."""
    try:
        engine.registry  # noqa: B018 -- built now, to be frozen with the rest
    except Exception:  # the first run start raises it again, as it would have without this
        log.warning("could not build the graphs before freezing the heap", exc_info=True)
    gc.collect()
    gc.freeze()
