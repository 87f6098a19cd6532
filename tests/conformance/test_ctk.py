"""AGENT-HOOKS-0.1 conformance: every vector of the kit, run through our LangGraph host.

A vector passes, fails, or is skipped when it needs a capability we do not claim (the kit's
runner decides; see ``LangGraphHarness.capabilities``). ``conftest.py`` parametrizes
``test_vector`` and prints the closing tally.

When the kit's pytest plugin is told to run our harness (``--agent-hooks-harness=...``), its
drop-in test in ``test_ctk_plugin.py`` runs the vectors instead.
"""

from __future__ import annotations

from typing import Any

import pytest
from agent_hooks.ctk import run_vector

from tests.conformance.harness import LangGraphHarness


async def test_vector(ctk_vector: dict[str, Any]) -> None:
    result = await run_vector(LangGraphHarness(), ctk_vector)
    if result.status == "skip":
        pytest.skip(result.detail)
    assert result.status == "pass", f"{result.id} {result.title}:\n" + "\n".join(result.failures)
