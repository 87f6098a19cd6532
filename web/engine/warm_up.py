"""What a new web process builds before it serves: every registered graph, and the inbox's
queries run once, so that the first approver after a (rolling) restart does not wait for what
was built lazily (a graph imported and compiled on first use, the inbox's statements prepared
on their connection and its pages read into PostgreSQL's cache: a first inbox page of
200,000 pending requests took about a second, the next ones 12 ms).

The app's lifespan runs it before the server accepts a connection, so ``/readyz`` answers
ready only once it is done.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from approvals.errors import ApprovalsError
from approvals.principals import Principal, Via

if TYPE_CHECKING:
    from web.engine.engine import Engine

log = logging.getLogger("approvals.web")


async def warm_up(engine: Engine) -> list[str]:
    """Load every registered graph and run the inbox's first page and counts once (as an
    operator: over every pending request, which is what an approver's query reads a part of).
    Returns what could not be loaded; a graph that fails here fails its first use as before,
    and is logged now."""
    failed: list[str] = []
    for name in engine.agent_names():
        try:
            await engine.registry.load(name)
        except ApprovalsError as exc:
            log.warning("warm-up: graph %r could not be loaded: %s", name, exc)
            failed.append(name)
    operator = Principal(
        id="warm-up:operator",
        name="warm-up",
        via=Via.TOKEN,
        groups=frozenset({engine.rules.operator_group}),
    )
    await engine.pending_page(operator)
    # Past the engine's shared count (kept a few seconds): a count made now would be handed to
    # the first operators as it stood before they came.
    await engine.requests.pending_counts(engine.viewer(operator))
    return failed
