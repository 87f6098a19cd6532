"""AGENT-HOOKS-0.1 conformance through the ``create_agent`` host: every vector of the kit, run
through an ordinary langchain agent governed only by ``ApprovalMiddleware``."""

from __future__ import annotations

from typing import Any

import pytest
from agent_hooks.ctk import run_vector

from tests.conformance.middleware_harness import MiddlewareHarness


async def test_vector_through_create_agent(ctk_vector: dict[str, Any]) -> None:
    result = await run_vector(MiddlewareHarness(), ctk_vector)
    if result.status == "skip":
        pytest.skip(result.detail)
    assert result.status == "pass", f"{result.id} {result.title}:\n" + "\n".join(result.failures)
