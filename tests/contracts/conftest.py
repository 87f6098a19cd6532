"""The port contract tests run every test twice: on the PostgreSQL adapters (a real database,
a fresh copy of the migrated template per test) and on the in-memory adapter. A test here
states what every adapter of a port must do, so a difference between the two fails one run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.contracts.backends import Adapters, memory_adapters, postgres_adapters


@pytest_asyncio.fixture
async def pg_adapters(database_url: str) -> AsyncIterator[Adapters]:
    async with postgres_adapters(database_url) as adapters:
        yield adapters


@pytest.fixture(params=["postgres", "memory"])
def adapters(request: pytest.FixtureRequest) -> Adapters:
    """Every port's adapter, once per backend."""
    if request.param == "postgres":
        pg: Adapters = request.getfixturevalue("pg_adapters")
        return pg
    return memory_adapters()
