"""The kit's drop-in conformance test, for a run through its pytest plugin:

    pytest --agent-hooks-harness=tests.conformance.harness:LangGraphHarness tests/conformance

(the plugin is installed as a pytest11 entry point; ``-p agent_hooks.ctk.plugin`` works too
when the entry point is disabled with ``-p no:agent_hooks_ctk``). Without that option this
module is not collected and ``test_ctk.py`` runs the vectors.
"""

from __future__ import annotations


def test_conformance(agent_hooks_assert: None) -> None:
    """The plugin's fixture runs the vector through the harness, and asserts or skips."""
