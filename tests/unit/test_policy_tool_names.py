"""A policy rule that names a tool its graph does not have is refused when the graph is
registered, at every host: under ``default: allow`` a typo there (``delete_customr``) would let
every call the rule was written to stop run with no approval."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from approvals.errors import GraphLoadError
from approvals.memory import MemoryApprovalRequests, MemoryStore, MemoryToolLedger
from approvals.policy import PolicyError, check_tool_names, parse_policy
from graphs.hosts.registry import EXAMPLE_GRAPHS, GraphRegistry
from graphs.tool_call.deps import GraphDeps
from tests.unit.policy_tool_graphs import HOSTS, POLICIES, TOOLS

MODULE = "tests.unit.policy_tool_graphs"
#: The line of the rule that names ``delete_*`` in every policy of ``POLICIES``.
RULE_LINE = 8
EXAMPLE_POLICIES = Path(__file__).resolve().parents[2] / "graphs" / "examples" / "policies"


def _registry() -> GraphRegistry:
    store = MemoryStore()
    deps = GraphDeps(
        checkpointer=InMemorySaver(),
        requests=MemoryApprovalRequests(store),
        ledger=MemoryToolLedger(store),
    )
    entries = {f"{host}__{key}": f"{MODULE}:{host}__{key}" for host in HOSTS for key in POLICIES}
    return GraphRegistry(deps, {**EXAMPLE_GRAPHS, **entries})


def _register(registry: GraphRegistry, host: str, key: str) -> list[str]:
    """Register the entry (as the engine does on first use); the names of its tools."""
    return sorted(t["name"] for t in registry.describe_tools(f"{host}__{key}"))


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_a_rule_naming_a_tool_the_graph_lacks_refuses_the_registration(host: str) -> None:
    registry = _registry()
    with pytest.raises(GraphLoadError) as refused:
        _register(registry, host, "typo")
    message = str(refused.value)
    assert f"support.yaml:{RULE_LINE}: rule deletes-need-approval: " in message
    assert "tool 'delete_customr' is not a tool of graph" in message
    assert "did you mean 'delete_customer'?" in message
    assert "tool_may_be_absent: true" in message
    # Still refused the next time: nothing half-registered is served.
    with pytest.raises(GraphLoadError):
        _register(registry, host, "typo")


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_a_pattern_matching_no_tool_refuses_the_registration(host: str) -> None:
    with pytest.raises(GraphLoadError) as refused:
        _register(_registry(), host, "pattern_matches_nothing")
    message = str(refused.value)
    assert f"support.yaml:{RULE_LINE}: " in message
    assert "tool pattern 'remove_*' matches no tool of graph" in message


@pytest.mark.parametrize("host", sorted(HOSTS))
@pytest.mark.parametrize("key", ["right", "pattern_matches", "absent_allowed"])
def test_rules_naming_the_graphs_tools_or_saying_they_may_be_absent_register(
    host: str, key: str
) -> None:
    assert _register(_registry(), host, key) == sorted(TOOLS)


def test_the_check_names_the_nearest_tools_and_lists_the_graphs() -> None:
    policy = parse_policy(POLICIES["typo"], "support.yaml")
    with pytest.raises(PolicyError) as refused:
        check_tool_names(policy, ["lookup_customer", "delete_customer"], graph="support")
    assert refused.value.line == RULE_LINE
    assert refused.value.reason.startswith(
        "rule deletes-need-approval: tool 'delete_customr' is not a tool of graph 'support'; "
        "did you mean 'delete_customer'? (its tools: delete_customer, lookup_customer)"
    )
    with pytest.raises(PolicyError) as nothing:
        check_tool_names(policy, [], graph="empty")
    assert "(the graph has no tools)" in nothing.value.reason
    # The first rule (lookup_customer) is the one refused when the graph has neither tool.
    assert nothing.value.line == 4


def test_tool_may_be_absent_is_a_boolean_on_a_rule_that_names_a_tool() -> None:
    with pytest.raises(PolicyError) as not_boolean:
        parse_policy(
            POLICIES["typo"].replace(
                "    action: escalate", "    tool_may_be_absent: yes please\n    action: escalate"
            ),
            "p.yaml",
        )
    assert not_boolean.value.line == 11
    assert "tool_may_be_absent: expected true or false" in not_boolean.value.reason
    without_tool = (
        "policy: p\ndefault: allow\nrules:\n"
        "  - id: r\n    point: pre_tool_call\n    tool_may_be_absent: true\n    action: deny\n"
    )
    with pytest.raises(PolicyError) as refused:
        parse_policy(without_tool, "p.yaml")
    assert refused.value.line == 6
    assert "applies only to a rule that names a 'tool'" in refused.value.reason
    loaded = parse_policy(POLICIES["absent_allowed"], "p.yaml")
    assert loaded.rules[1].tool_may_be_absent is True
    assert loaded.rules[1].to_json()["tool_may_be_absent"] is True
    assert loaded.rules[0].tool_may_be_absent is False


@pytest.mark.parametrize("name", sorted(EXAMPLE_GRAPHS))
def test_the_example_graphs_still_register(name: str) -> None:
    assert _registry().describe_tools(name)
