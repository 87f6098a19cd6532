"""``approvals policy check FILE --graph NAME``: a rule whose tool is none of the graph's tools
is refused as registering the graph with that policy would be, with its line and a
did-you-mean; the shipped policies pass against the graphs they govern."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.inprocess import invoke

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "graphs" / "examples" / "policies"

TYPO = (
    "policy: refund\n"
    "default: allow\n"
    "rules:\n"
    "  - id: refunds-need-support\n"
    "    point: pre_tool_call\n"
    "    tool: issue_refnd\n"
    "    action: escalate\n"
    "    approvers: [support]\n"
)


async def test_a_rule_naming_no_tool_of_the_graph_is_refused(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    policy = tmp_path / "refund.yaml"
    policy.write_text(TYPO)
    alone = await invoke(cli_env, "policy", "check", str(policy))
    assert (alone.code, alone.stdout) == (0, f"{policy}: ok (1 rule)\n")

    refused = await invoke(cli_env, "policy", "check", str(policy), "--graph", "refund")
    assert refused.code == 2
    assert refused.stdout == ""
    assert refused.stderr == (
        f"error: {policy}:4: rule refunds-need-support: tool 'issue_refnd' is not a tool of "
        "graph 'refund'; did you mean 'issue_refund'? (its tools: issue_refund, lookup_order). "
        "The rule could never apply; fix the name, or say tool_may_be_absent: true if the "
        "tool may really be absent\n"
    )
    as_json = await invoke(cli_env, "policy", "check", str(policy), "--graph", "refund", "--json")
    assert as_json.code == 2
    assert as_json.json()["line"] == 4
    assert as_json.json()["ok"] is False
    assert "did you mean 'issue_refund'?" in as_json.json()["reason"]

    opted_out = tmp_path / "opted.yaml"
    opted_out.write_text(TYPO.replace("    action:", "    tool_may_be_absent: true\n    action:"))
    allowed = await invoke(cli_env, "policy", "check", str(opted_out), "--graph", "refund")
    assert allowed.code == 0, allowed.stderr
    assert allowed.stdout == f"{opted_out}: ok (1 rule; its tools are graph 'refund''s)\n"


async def test_the_shipped_policies_name_their_graphs_tools(cli_env: dict[str, str]) -> None:
    for policy, graph in (
        ("refund", "refund"),
        ("refund", "refund_openai"),
        ("email", "email"),
    ):
        path = EXAMPLES / f"{policy}.yaml"
        result = await invoke(cli_env, "policy", "check", str(path), "--graph", graph, "--json")
        assert result.code == 0, result.stderr
        assert result.json()["graph"] == graph


async def test_an_unknown_graph_is_not_found(cli_env: dict[str, str], tmp_path: Path) -> None:
    policy = tmp_path / "refund.yaml"
    policy.write_text(TYPO)
    result = await invoke(cli_env, "policy", "check", str(policy), "--graph", "nope")
    assert result.code == 4
    assert "nope" in result.stderr
