"""Our own host declaration says what the harness claims, and the kit accepts it."""

from __future__ import annotations

from agent_hooks.ctk.runner import _resolve_surface_only

from tests.conformance.harness import CAPABILITIES, LangGraphHarness


def test_the_declaration_claims_exactly_the_harness_capabilities() -> None:
    harness = LangGraphHarness()
    document = harness.declaration()

    assert sorted(document["surface"]["capabilities"]) == sorted(c.value for c in CAPABILITIES)
    assert document["configuration"]["posture"]["tool_seam_host_error"] == (
        harness.tool_seam_host_error
    )


def test_the_declaration_resolves_against_the_harness_surface() -> None:
    harness = LangGraphHarness()

    # The kit's own check of a harness's declaration (§7.7.9); a refusal raises.
    resolved = _resolve_surface_only(harness.declaration(), harness.host_surface())

    assert resolved["surface"]["buffered_output"] is True
    assert "incremental_output" not in resolved["surface"]["capabilities"]
    assert "bigint_json" in resolved["surface"]["capabilities"]
