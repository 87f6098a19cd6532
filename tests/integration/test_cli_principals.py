"""``--as`` in the operator console names a person the way the web app does (issue 30, item 6).

``--as bob`` is the account ``local:bob``, so a run started ``--as bob`` is bob's and bob's web
account or token may not approve it (separation of duties); a name that is no account is
refused; a principal that is no person (``cli:deploy-bot``) may start runs but never decides.
"""

from __future__ import annotations

import pytest

from approvals.errors import NotAllowed
from approvals.principals import Principal
from tests.integration.helpers import person_token, scalar
from tests.integration.inprocess import invoke
from web.engine import Engine

pytestmark = pytest.mark.slow

PASSWORD = "correct horse battery staple"
REFUND = '{"message": "refund 1001"}'


async def _start(cli_env: dict[str, str], who: str) -> tuple[str, str]:
    """Start a refund run ``--as who``: its id and its one pending request's."""
    started = await invoke(cli_env, "runs", "start", "refund", "--input", REFUND, "--as", who)
    assert started.code == 0, started.stderr
    run = started.json()
    assert run["status"] == "waiting", run
    [request_id] = run["pending"]
    return str(run["run_id"]), str(request_id)


async def test_a_run_started_as_bob_is_not_approved_by_bobs_account_or_token(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    secret = await person_token(engine, "bob", "support")
    run_id, request_id = await _start(cli_env, "bob")
    started_by = await scalar(engine, "SELECT started_by FROM runs WHERE id = %s", run_id)
    assert started_by == "local:bob"

    web_bob = Principal.local("bob", frozenset({"support"}))
    with pytest.raises(NotAllowed, match="separation of duties"):
        await engine.decide(request_id, "approve", principal=web_bob)
    token_bob = await engine.accounts.verify_token(secret)
    assert token_bob is not None
    with pytest.raises(NotAllowed, match="separation of duties"):
        await engine.decide(request_id, "approve", principal=token_bob)

    # Another person may.
    await engine.accounts.add_user("carol", PASSWORD, ["support"])
    carol = Principal.local("carol", frozenset({"support"}))
    decided = await engine.decide(request_id, "approve", principal=carol)
    assert decided.principal == "local:carol"


async def test_local_name_spelled_out_is_the_same_account(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    await engine.accounts.add_user("bob", PASSWORD, ["support"])
    run_id, _ = await _start(cli_env, "local:bob")
    assert await scalar(engine, "SELECT started_by FROM runs WHERE id = %s", run_id) == "local:bob"


@pytest.mark.parametrize("who", ["nobody", "local:nobody", "token:ci", "oidc:no-subject", "a b:c"])
async def test_a_name_that_is_no_account_is_refused(
    engine: Engine, cli_env: dict[str, str], who: str
) -> None:
    started = await invoke(cli_env, "runs", "start", "refund", "--input", REFUND, "--as", who)
    assert started.code == 2, (started.stdout, started.stderr)
    assert "principal" in started.stderr
    assert started.stderr.count("\n") == 1, started.stderr  # one line, no traceback
    assert await scalar(engine, "SELECT count(*) FROM runs") == 0


async def test_a_disabled_account_is_refused(engine: Engine, cli_env: dict[str, str]) -> None:
    await engine.accounts.add_user("bob", PASSWORD, ["support"])
    assert await engine.accounts.disable_user("bob")
    started = await invoke(cli_env, "runs", "start", "refund", "--input", REFUND, "--as", "bob")
    assert started.code == 2, started.stderr
    assert "disabled" in started.stderr


async def test_a_non_person_principal_starts_a_run_but_never_decides(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    run_id, request_id = await _start(cli_env, "cli:deploy-bot")
    started_by = await scalar(engine, "SELECT started_by FROM runs WHERE id = %s", run_id)
    assert started_by == "cli:deploy-bot"
    decided = await invoke(cli_env, "decide", request_id, "approve", "--as", "cli:deploy-bot")
    assert decided.code == 2, (decided.stdout, decided.stderr)
    assert "only a person decides" in decided.stderr
    status = await scalar(engine, "SELECT status FROM approval_requests WHERE id = %s", request_id)
    assert status == "pending"


async def test_the_console_decides_in_the_accounts_name(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    await engine.accounts.add_user("bob", PASSWORD, ["support"])
    _, request_id = await _start(cli_env, "cli:deploy-bot")
    unknown = await invoke(cli_env, "decide", request_id, "approve", "--as", "nobody")
    assert unknown.code == 2, unknown.stderr
    assert "names no account" in unknown.stderr
    decided = await invoke(cli_env, "decide", request_id, "approve", "--as", "bob")
    assert decided.code == 0, decided.stderr
    assert decided.json()["principal"] == "local:bob"
