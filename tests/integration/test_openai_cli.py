"""The OpenAI-SDK refund agent through the ``approvals`` command, as the README shows it: its
tools listed, a run started, decided and resumed from the console, and the demo run with
``--agent refund_openai``."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from tests.integration.helpers import side_effects
from tests.integration.inprocess import invoke
from tests.integration.processes import spawn
from web.engine import Engine

pytestmark = pytest.mark.slow


async def test_the_sdk_agents_function_tools_are_listed_with_their_schema(
    cli_env: dict[str, str],
) -> None:
    listed = await invoke(cli_env, "tools", "list", "refund_openai", "--json")
    assert listed.code == 0, listed.stderr
    tools = {t["name"]: t for t in listed.json()["refund_openai"]}
    assert set(tools) == {"lookup_order", "issue_refund"}
    refund = tools["issue_refund"]
    assert refund["needs_approval"] == "always"
    assert refund["sensitive"] is True
    assert refund["agent"] == "refund_openai"
    assert refund["description"].startswith("Refund money to the customer")
    # The schema the SDK gives the model (params_json_schema), as the approver's page shows it.
    assert refund["arguments"]["properties"]["amount"]["type"] == "number"
    assert set(refund["arguments"]["required"]) == {"order_id", "amount", "reason"}
    assert refund["arguments"]["additionalProperties"] is False
    lookup = tools["lookup_order"]
    assert lookup["needs_approval"] == "never"
    assert lookup["sensitive"] is False
    # The same shape as a LangGraph tool's listing, where the fields apply.
    langgraph = (await invoke(cli_env, "tools", "list", "refund", "--json")).json()["refund"]
    assert set(langgraph[0]) <= set(refund)

    text = await invoke(cli_env, "tools", "list", "refund_openai")
    assert text.code == 0, text.stderr
    assert "  issue_refund (needs approval): Refund money" in text.stdout
    assert "  lookup_order (runs directly): Look up an order" in text.stdout


async def test_a_run_started_decided_and_resumed_from_the_console(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    # --as NAME is the account NAME (local:NAME): the people exist.
    for name in ("alice", "bob"):
        await engine.accounts.add_user(name, "correct horse battery staple", ["support"])
    started = await invoke(
        cli_env,
        "runs",
        "start",
        "refund_openai",
        "--input",
        '{"message": "Please refund order 1001"}',
        "--as",
        "alice",
    )
    assert started.code == 0, started.stderr
    run = started.json()
    assert run["status"] == "waiting", run
    [request_id] = run["pending"]
    edit = await invoke(
        cli_env, "decide", request_id, "approve", "--args", '{"order_id": "1001", "amount": 1}',
        "--as", "bob",
    )  # fmt: skip
    assert edit.code == 2, edit.stdout
    assert "edit" in edit.stderr
    decided = await invoke(cli_env, "decide", request_id, "approve", "--as", "bob")
    assert decided.code == 0, decided.stderr
    drained = await invoke(cli_env, "worker", "--drain")
    assert drained.code == 0, drained.stderr
    shown = (await invoke(cli_env, "runs", "show", run["run_id"], "--json")).json()
    assert shown["status"] == "completed", shown
    assert shown["answer"] == "Refunded 25.00 on order 1001."
    request = await engine.requests.get(request_id)
    assert request is not None
    assert len(await side_effects(engine, request.run_id, request.call_id)) == 1


async def test_the_demo_runs_the_openai_sdk_agent_and_finishes_once_decided(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    demo = await spawn(cli_env, "demo", "--agent", "refund_openai", "--port", "0")
    assert demo.stdout is not None
    request_id = None
    seen: list[str] = []
    while request_id is None:
        line = (await asyncio.wait_for(demo.stdout.readline(), 120)).decode()
        assert line, f"demo ended early: {''.join(seen)}"
        seen.append(line)
        found = re.search(r"approvals decide ([0-9a-f-]{36}) approve", line)
        if found:
            request_id = found.group(1)
    decided = await invoke(cli_env, "decide", request_id, "reject", "--reason", "not eligible",
                           "--as", "demo-approver")  # fmt: skip
    assert decided.code == 0, decided.stderr
    rest, _ = await asyncio.wait_for(demo.communicate(), 120)
    printed = "".join(seen) + rest.decode()
    assert demo.returncode == 0, printed
    assert "of the refund_openai agent" in printed
    # Its requests take no edits, so the demo offers none.
    assert "--args" not in printed
    assert "is completed" in printed
    assert "not eligible" in printed
    request = await engine.requests.get(request_id)
    assert request is not None
    assert await side_effects(engine, request.run_id, request.call_id) == []
    assert json.loads(decided.stdout)["request_id"] == request_id


async def test_the_demo_refuses_an_unknown_agent(cli_env: dict[str, str]) -> None:
    result = await invoke(cli_env, "demo", "--agent", "nope", "--port", "0")
    assert result.code == 4, result.stderr
    assert "unknown graph" in result.stderr
