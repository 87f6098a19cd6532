"""The CLI contract: JSON on stdout, one-line errors on stderr, documented exit codes."""

from __future__ import annotations

import asyncio
import json
import re
import uuid

import pytest

from tests.integration.helpers import side_effects
from tests.integration.inprocess import invoke
from tests.integration.processes import APPROVALS, spawn
from web.engine import Engine

pytestmark = pytest.mark.slow

#: A person the console may name without a local account (an OpenID Connect sign-in).
OIDC_BOB = "oidc:https://id.example#bob"


async def test_start_list_decide_and_show_a_run(engine: Engine, cli_env: dict[str, str]) -> None:
    # --as NAME is the account NAME (local:NAME): the people exist.
    for name in ("alice", "bob"):
        await engine.accounts.add_user(name, "correct horse battery staple", ["support"])
    started = await invoke(
        cli_env,
        "runs",
        "start",
        "refund",
        "--input",
        '{"message": "Refund orders 1001 and 1002"}',
        "--as",
        "alice",
        "--thread-id",
        "customer-42",
    )
    assert started.code == 0, started.stderr
    run = started.json()
    assert run["status"] == "waiting"
    assert run["thread_id"] == "customer-42"
    assert len(run["pending"]) == 2

    listed = (await invoke(cli_env, "pending", "list", "--json")).json()
    assert {r["id"] for r in listed} == set(run["pending"])
    for item in listed:
        assert set(item) >= {
            "id",
            "run_id",
            "call_id",
            "tool",
            "shown",
            "identity",
            "status",
            "created_at",
            "expires_at",
        }
        assert item["status"] == "pending"
        assert item["identity"].startswith("jcs-sha256:")
        assert item["shown"]["args"]["order_id"] in {"1001", "1002"}

    by_call = {r["call_id"]: r["id"] for r in listed}
    decided = await invoke(
        cli_env,
        "decide",
        by_call["refund-1001"],
        "approve",
        "--as",
        "bob",
        "--args",
        '{"order_id": "1001", "amount": 5, "reason": "goodwill"}',
    )
    assert decided.code == 0, decided.stderr
    assert decided.json()["decision"] == "edit"
    assert decided.json()["principal"] == "local:bob"
    rejected = await invoke(
        cli_env, "decide", by_call["refund-1002"], "reject", "--reason", "fraud", "--as", "bob"
    )
    assert rejected.json()["decision"] == "reject"
    assert (await invoke(cli_env, "worker", "--drain")).json() == {"resumed": 2}

    shown = await invoke(cli_env, "runs", "show", run["run_id"], "--json")
    report = shown.json()
    assert report["status"] == "completed"
    assert report["pending"] == []
    executions = {e["call_id"]: e for e in report["tool_executions"]}
    assert executions["refund-1001"]["status"] == "succeeded"
    assert executions["refund-1001"]["tool"] == "issue_refund"
    assert "refund-1002" not in executions
    effects = await side_effects(engine, run["run_id"], "refund-1001")
    assert effects[0]["args"]["amount"] == 5
    points = [(i["point"], i["decision"]) for i in report["interceptions"]]
    assert points[0] == ("agent_startup", "allow")
    assert points[-1] == ("agent_shutdown", "allow")
    resolved = [i for i in report["interceptions"] if i["resolved_by"]]
    # Approved with an edit, rejected: each decided call recorded once, when decided; the
    # edited arguments went through pre_tool_call again, and the same approvers' decision
    # covered their escalation.
    assert sorted((i["decision"], i["resolved_by"]) for i in resolved) == [
        ("allow", "approval"),
        ("deny", "rejection"),
        ("transform", "approval"),
    ]
    text = await invoke(cli_env, "runs", "show", run["run_id"])
    assert "completed" in text.stdout
    assert "agent_startup" in text.stdout
    assert "via approval" in text.stdout


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["decide", "not-an-id", "approve", "--as", OIDC_BOB], 2, "not a valid request id"),
        (["decide", str(uuid.uuid4()), "approve", "--as", OIDC_BOB], 4, "does not exist"),
        (["runs", "start", "refund", "--input", "{not json"], 2, "--input is not valid JSON"),
        (["runs", "start", "refund", "--input", '{"msg": 1}'], 2, "invalid run input"),
        (["runs", "start", "nope", "--input", '{"message": "x"}'], 4, "unknown graph"),
        (["runs", "show", "abc", "--json"], 2, "not a valid run id"),
        (["worker", "--drain", "--concurrency", "30"], 1, "APPROVALS_POOL_MAX_SIZE"),
        (["runs", "show", str(uuid.uuid4())], 4, "does not exist"),
    ],
)
async def test_errors_are_one_line_with_their_exit_code(
    cli_env: dict[str, str], args: list[str], code: int, message: str
) -> None:
    result = await invoke(cli_env, *args)
    assert result.code == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert result.stdout == ""


async def test_decide_exit_codes_for_a_decided_request(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    run = await engine.runner.start("refund", {"message": "refund 1001"}, principal="alice")
    for name in ("ann", "bob"):
        await engine.accounts.add_user(name, "correct horse battery staple", ["support"])
    first = await invoke(
        cli_env, "decide", run.pending[0], "reject", "--reason", "no", "--as", "ann"
    )
    assert first.code == 0
    again = await invoke(cli_env, "decide", run.pending[0], "approve", "--as", "bob")
    assert again.code == 3
    assert "no longer pending (status: rejected)" in again.stderr
    strict = {**cli_env, "APPROVALS_REQUIRE_REJECT_REASON": "true"}
    invalid = await invoke(strict, "decide", run.pending[0], "reject", "--as", "bob")
    assert invalid.code == 2
    assert "needs a reason" in invalid.stderr


async def test_an_unreachable_database_is_one_clear_line(cli_env: dict[str, str]) -> None:
    env = {**cli_env, "APPROVALS_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}
    result = await invoke(env, "pending", "list")
    assert result.code == 1
    assert result.stderr.startswith("error: database unavailable")
    assert len(result.stderr.strip().splitlines()) == 1


async def test_the_demo_pauses_and_finishes_once_decided(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    demo = await spawn(cli_env, "demo")
    assert demo.stdout is not None
    request_id = None
    seen: list[str] = []
    while request_id is None:
        line = (await asyncio.wait_for(demo.stdout.readline(), 120)).decode()
        assert line, f"demo ended early: {''.join(seen)}"
        seen.append(line)
        found = re.search(r"approvals decide ([0-9a-f-]{36}) approve --as demo-approver$", line)
        if found:
            request_id = found.group(1)
    # The command the demo prints names its approver's account, which exists.
    decided = await invoke(cli_env, "decide", request_id, "approve", "--as", "demo-approver")
    assert decided.code == 0, decided.stderr
    rest, _ = await asyncio.wait_for(demo.communicate(), 120)
    assert demo.returncode == 0
    assert "is completed" in rest.decode()
    request = await engine.requests.get(request_id)
    assert request is not None
    assert len(await side_effects(engine, request.run_id, request.call_id)) == 1
    assert json.loads(decided.stdout)["request_id"] == request_id


async def test_an_unmigrated_database_says_to_upgrade(
    admin_url: str, cli_env: dict[str, str]
) -> None:
    from tests.db_pool import admin_statement as _admin
    from tests.db_pool import with_database

    name = f"approvals_empty_{uuid.uuid4().hex[:8]}"
    await _admin(admin_url, f"CREATE DATABASE {name}")
    try:
        env = {**cli_env, "APPROVALS_DATABASE_URL": with_database(admin_url, name)}
        result = await invoke(env, "pending", "list")
        assert result.code == 1
        assert "approvals db upgrade" in result.stderr
        upgraded = await invoke(env, "db", "upgrade")
        assert upgraded.code == 0, upgraded.stderr
        assert (await invoke(env, "db", "upgrade")).code == 0
        assert (await invoke(env, "pending", "list", "--json")).json() == []
    finally:
        await _admin(admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


async def test_malformed_configuration_is_one_clear_line(cli_env: dict[str, str]) -> None:
    result = await invoke({**cli_env, "APPROVALS_GRAPHS": "{not json"}, "pending", "list")
    assert result.code == 1
    assert len(result.stderr.strip().splitlines()) == 1
    assert "graphs" in result.stderr


async def test_runs_show_reports_the_final_answer(engine: Engine, cli_env: dict[str, str]) -> None:
    run = await engine.runner.start("refund", {"message": "refund 1001"}, principal="alice")
    await engine.decide_as_operator(
        run.pending[0], "reject", principal="bob", reason="not eligible"
    )
    await engine.worker.drain()
    report = (await invoke(cli_env, "runs", "show", run.run_id, "--json")).json()
    assert report["status"] == "completed"
    assert "not eligible" in report["answer"]


async def test_tools_are_listed_with_their_validation(cli_env: dict[str, str]) -> None:
    listed = await invoke(cli_env, "tools", "list", "--json")
    assert listed.code == 0, listed.stderr
    tools = {t["name"]: t for t in listed.json()["refund"]}
    refund = tools["issue_refund"]
    assert refund["sensitive"] is True
    assert [c["name"] for c in refund["preconditions"]] == ["order_is_paid", "amount_within_paid"]
    assert refund["approver_group"] == "finance"
    assert refund["arguments"]["properties"]["amount"]["maximum"] == 10_000
    assert tools["lookup_order"]["sensitive"] is False
    # What the policy does with each tool, rule by rule, in the order they are tried.
    assert [(p["rule"], p["action"]) for p in refund["policy"]] == [
        ("no-huge-refunds", "deny"),
        ("third-refund-in-a-run", "warn"),
        ("big-refunds-need-finance", "escalate"),
        ("refunds-need-support", "escalate"),
        (None, "allow"),
    ]
    assert refund["policy"][2]["approvers"] == ["finance"]
    assert refund["policy"][2]["when"] == "args.amount > 100.0"
    assert [p["action"] for p in tools["lookup_order"]["policy"]] == ["allow"]
    text = (await invoke(cli_env, "tools", "list", "refund")).stdout
    assert "    policy: escalate to support (rule refunds-need-support of refund)" in text
    # The OpenAI-SDK example is registered where the SDK is installed (make test installs it).
    assert set(listed.json()) == {"refund", "email", "refund_openai"}
    missing = await invoke(cli_env, "tools", "list", "nope")
    assert missing.code == 4
    assert "unknown graph" in missing.stderr


async def test_an_argument_that_is_not_utf8_exits_2_before_anything_is_done(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    """Bytes a shell passes as they are (here 0xff): the real entry point refuses them before a
    command starts, instead of failing in the database half-way (exit 1, 'unexpected')."""
    await engine.accounts.create_token("ci", ["finance"], created_by="test", owner=None)
    proc = await asyncio.create_subprocess_exec(
        APPROVALS.encode(),
        b"tokens",
        b"revoke",
        b"ci",
        b"--as",
        b"\xffbob",
        env=cli_env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2, err
    assert err.decode() == "error: argument 5 '\\udcffbob' is not valid UTF-8 text\n"
    assert out == b""
    [token] = await engine.accounts.tokens()
    assert token.revoked_at is None
