"""Readiness, as the web app's ``/readyz`` and a worker's probe both answer it: the database
answers within a deadline with the schema this code needs."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from approvals.errors import DatabaseUnavailable

if TYPE_CHECKING:
    from storage.migrate import SchemaState
    from web.engine.engine import Engine


async def schema_or_problem(
    engine: Engine, deadline: float
) -> tuple[SchemaState | None, str | None]:
    """The schema applied, or why the process is not ready: the database did not answer
    within ``deadline`` seconds, could not be reached, or holds another schema."""
    try:
        schema = await asyncio.wait_for(engine.operations.schema(), deadline)
    except TimeoutError:
        return None, f"the database did not answer within {deadline:g}s"
    except DatabaseUnavailable as exc:
        return None, str(exc)
    except Exception as exc:  # readiness answers, whatever went wrong
        return None, f"{type(exc).__name__}: {exc}"
    return schema, schema.problem
