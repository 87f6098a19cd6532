"""Local accounts and API tokens: secrets never stored, only the right ones accepted."""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
from typing import Any

import pytest
from psycopg import sql

from approvals.errors import AccountExists, InvalidAccount
from approvals.principals import Principal, Via
from tests.integration.helpers import scalar
from tests.integration.inprocess import invoke
from tests.integration.processes import APPROVALS, Result
from web.engine import Engine

PASSWORD = "correct horse battery staple"


async def _rows(engine: Engine, table: str) -> list[dict[str, Any]]:
    """Every row of one of the engine's tables, as stored."""
    query = sql.SQL("SELECT * FROM {} ORDER BY 1").format(sql.Identifier(table))
    async with engine.connection() as conn:
        return await (await conn.execute(query)).fetchall()


async def _audit(engine: Engine, prefix: str) -> list[dict[str, Any]]:
    rows = await _rows(engine, "audit_events")
    return [r for r in rows if r["kind"].startswith(prefix)]


async def test_a_user_signs_in_with_the_right_password_only(engine: Engine) -> None:
    added = await engine.accounts.add_user("alice", PASSWORD, ["finance", "approvers"])
    assert added == Principal.local("alice", frozenset({"finance", "approvers"}))

    signed_in = await engine.accounts.authenticate("alice", PASSWORD)
    assert signed_in is not None
    assert signed_in.id == "local:alice"
    assert signed_in.via is Via.PASSWORD
    assert signed_in.groups == {"finance", "approvers"}

    assert await engine.accounts.authenticate("alice", PASSWORD + "!") is None
    assert await engine.accounts.authenticate("alice", "") is None
    assert await engine.accounts.authenticate("alice", PASSWORD * 100) is None
    assert await engine.accounts.authenticate("bob", PASSWORD) is None
    assert await engine.accounts.authenticate("Not A Name", PASSWORD) is None


async def test_the_password_is_stored_only_as_an_argon2id_hash(engine: Engine) -> None:
    await engine.accounts.add_user("alice", PASSWORD, ["finance"])
    (row,) = await _rows(engine, "users")
    assert row["password_hash"].startswith("$argon2id$v=19$m=47104,t=1,p=1$")
    assert PASSWORD not in str(row)
    (created,) = await _audit(engine, "account.")
    assert created["kind"] == "account.created"
    assert created["data"] == {"name": "alice", "groups": ["finance"]}
    assert PASSWORD not in str(await _rows(engine, "audit_events"))


async def test_a_disabled_user_cannot_sign_in(engine: Engine) -> None:
    await engine.accounts.add_user("alice", PASSWORD, ["finance"])
    assert await engine.accounts.disable_user("alice", by="cli:root")
    assert not await engine.accounts.disable_user("alice")
    assert not await engine.accounts.disable_user("nobody")
    assert await engine.accounts.authenticate("alice", PASSWORD) is None
    (user,) = await engine.accounts.users()
    assert user.disabled
    kinds = [(e["kind"], e["principal"]) for e in await _audit(engine, "account.")]
    assert kinds == [("account.created", None), ("account.disabled", "cli:root")]


async def test_a_taken_name_is_refused(engine: Engine) -> None:
    await engine.accounts.add_user("alice", PASSWORD, ["finance"])
    with pytest.raises(AccountExists, match="user named 'alice' already exists"):
        await engine.accounts.add_user("alice", "another good password", ["ops"])
    assert await engine.accounts.authenticate("alice", PASSWORD) is not None
    assert len(await _audit(engine, "account.created")) == 1

    await engine.accounts.create_token("ci-bot", ["ops"], created_by="cli:root", owner=None)
    with pytest.raises(AccountExists, match="token named 'ci-bot' already exists"):
        await engine.accounts.create_token("ci-bot", ["ops"], created_by="cli:root", owner=None)


async def test_concurrent_adds_of_one_name_create_it_once(engine: Engine) -> None:
    outcomes = await asyncio.gather(
        *(engine.accounts.add_user("alice", PASSWORD, ["finance"]) for _ in range(4)),
        return_exceptions=True,
    )
    assert sum(isinstance(o, Principal) for o in outcomes) == 1
    assert sum(isinstance(o, AccountExists) for o in outcomes) == 3
    assert len(await _audit(engine, "account.created")) == 1


@pytest.mark.parametrize(
    ("name", "password", "groups", "message"),
    [
        ("Alice", PASSWORD, ["finance"], "invalid user name"),
        ("", PASSWORD, ["finance"], "invalid user name"),
        ("a" * 65, PASSWORD, ["finance"], "invalid user name"),
        ("alice", PASSWORD, [], "at least one group"),
        ("alice", PASSWORD, ["Finance"], "invalid group name"),
        ("alice", PASSWORD, ["fin ance"], "invalid group name"),
        ("alice", "too short", ["finance"], "12 to 1024 characters"),
        ("alice", "x" * 1025, ["finance"], "12 to 1024 characters"),
    ],
)
async def test_invalid_accounts_are_refused_and_nothing_is_written(
    engine: Engine, name: str, password: str, groups: list[str], message: str
) -> None:
    with pytest.raises(InvalidAccount, match=message):
        await engine.accounts.add_user(name, password, groups)
    assert await engine.accounts.users() == []
    assert await _audit(engine, "account.") == []


@pytest.mark.parametrize(
    ("name", "groups", "message"),
    [
        ("CI bot", ["ops"], "invalid token name"),
        ("ci-bot", [], "at least one group"),
        ("ci-bot", ["-ops"], "invalid group name"),
    ],
)
async def test_invalid_tokens_are_refused(
    engine: Engine, name: str, groups: list[str], message: str
) -> None:
    with pytest.raises(InvalidAccount, match=message):
        await engine.accounts.create_token(name, groups, created_by="cli:root", owner=None)
    assert await engine.accounts.tokens() == []


async def test_a_token_verifies_until_it_is_revoked(engine: Engine) -> None:
    secret = await engine.accounts.create_token(
        "ci-bot", ["ops", "finance"], "cli:root", owner=None
    )
    assert secret.startswith("apv_")

    principal = await engine.accounts.verify_token(secret)
    assert principal == Principal.token("ci-bot", frozenset({"ops", "finance"}))
    assert principal.id == "token:ci-bot"

    (listed,) = await engine.accounts.tokens()
    assert (listed.name, listed.created_by, listed.revoked_at) == ("ci-bot", "cli:root", None)
    assert listed.groups == {"ops", "finance"}

    assert await engine.accounts.revoke_token("ci-bot", by="cli:root")
    assert await engine.accounts.verify_token(secret) is None
    assert not await engine.accounts.revoke_token("ci-bot")
    assert not await engine.accounts.revoke_token("nobody")
    (listed,) = await engine.accounts.tokens()
    assert listed.revoked_at is not None

    events = [(e["kind"], e["principal"]) for e in await _audit(engine, "token.")]
    assert events == [("token.created", "cli:root"), ("token.revoked", "cli:root")]


async def test_wrong_and_malformed_secrets_are_refused_without_error(engine: Engine) -> None:
    secret = await engine.accounts.create_token("ci-bot", ["ops"], "cli:root", owner=None)
    other = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    for wrong in [other, "", "apv_", "Bearer " + secret, secret + " ", "x" * 10_000, "\x00"]:
        assert await engine.accounts.verify_token(wrong) is None, wrong


async def test_only_the_digest_of_a_token_is_stored(engine: Engine) -> None:
    secret = await engine.accounts.create_token("ci-bot", ["ops"], "cli:root", owner=None)
    await engine.accounts.revoke_token("ci-bot")
    (row,) = await _rows(engine, "api_tokens")
    assert row["digest"] == hashlib.sha256(secret.encode()).hexdigest()
    stored = str(await _rows(engine, "api_tokens")) + str(await _rows(engine, "audit_events"))
    assert secret not in stored
    assert secret.removeprefix("apv_") not in stored


# Tokens belong to people: the rules compare the person behind a principal, never its id.


async def test_a_token_acts_for_its_owner_with_at_most_the_owners_groups(engine: Engine) -> None:
    await engine.accounts.add_user("alice", PASSWORD, ["support", "agents"])
    secret = await engine.accounts.create_token(
        "alice-bot", ["support", "agents"], "cli:root", owner="alice"
    )
    principal = await engine.accounts.verify_token(secret)
    assert principal is not None
    assert (principal.id, principal.person) == ("token:alice-bot", "local:alice")
    assert principal.groups == {"support", "agents"}
    (listed,) = await engine.accounts.tokens()
    assert listed.owner == "alice"
    (created,) = await _audit(engine, "token.created")
    assert created["data"]["owner"] == "alice"

    # Groups are read at every verification: a group the owner lost is the token's loss too.
    async with engine.connection() as conn:
        await conn.execute("UPDATE users SET groups = '{agents}' WHERE name = 'alice'")
    narrowed = await engine.accounts.verify_token(secret)
    assert narrowed is not None
    assert narrowed.groups == {"agents"}


async def test_a_token_of_a_disabled_owner_is_dead(engine: Engine) -> None:
    await engine.accounts.add_user("alice", PASSWORD, ["support"])
    secret = await engine.accounts.create_token("alice-bot", ["support"], "cli:root", owner="alice")
    assert await engine.accounts.verify_token(secret) is not None
    assert await engine.accounts.disable_user("alice")
    assert await engine.accounts.verify_token(secret) is None


@pytest.mark.parametrize(
    ("owner", "groups", "message"),
    [
        ("nobody", ["support"], "no enabled local account"),
        ("off", ["support"], "no enabled local account"),
        ("Not A Name", ["support"], "no enabled local account"),
        ("alice", ["support", "finance"], "groups its owner 'alice' is not in: finance"),
    ],
)
async def test_a_token_cannot_belong_to_a_missing_or_disabled_account_or_outgrow_it(
    engine: Engine, owner: str, groups: list[str], message: str
) -> None:
    await engine.accounts.add_user("alice", PASSWORD, ["support"])
    await engine.accounts.add_user("off", PASSWORD, ["support"])
    await engine.accounts.disable_user("off")
    with pytest.raises(InvalidAccount, match=message):
        await engine.accounts.create_token("bot", groups, "cli:root", owner=owner)
    assert await engine.accounts.tokens() == []
    assert await _audit(engine, "token.") == []


async def test_a_principals_person_is_the_same_in_python_and_in_the_database(
    engine: Engine,
) -> None:
    await engine.accounts.add_user("alice", PASSWORD, ["support"])
    owned = await engine.accounts.create_token("alice-bot", ["support"], "t", owner="alice")
    service = await engine.accounts.create_token("shop", ["agents"], "t", owner=None)
    principals = [
        Principal.local("alice", frozenset({"support"})),
        Principal.oidc("https://idp.example", "sub-1", "Alice", frozenset({"support"})),
        await engine.accounts.verify_token(owned),
        await engine.accounts.verify_token(service),
    ]
    expected = ["local:alice", "oidc:https://idp.example#sub-1", "local:alice", None]
    assert [p.person for p in principals if p is not None] == expected
    for principal in principals:
        assert principal is not None
        stored = await scalar(engine, "SELECT approvals_person_of_v1(%s)", principal.id)
        assert stored == principal.person, principal.id


# The CLI, run as the real `approvals` command.


async def _cli_stdin(env: dict[str, str], stdin: str, *args: str) -> Result:
    proc = await asyncio.create_subprocess_exec(
        APPROVALS,
        *args,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), 120)
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err.decode())


@pytest.mark.slow
async def test_cli_adds_a_user_whose_password_comes_from_stdin(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    added = await _cli_stdin(
        cli_env,
        PASSWORD + "\n",
        *("users", "add", "alice", "--group", "finance", "--group", "ops", "--password-stdin"),
    )
    assert added.code == 0, added.stderr
    assert added.stdout == "user alice created (groups: finance, ops)\n"
    # The trailing newline is not part of the password.
    assert await engine.accounts.authenticate("alice", PASSWORD) is not None

    # The real pipe once, above; the rest in this process (a second or two less).
    as_json = await invoke(
        cli_env,
        "users",
        "add",
        "bob",
        "--group",
        "ops",
        "--password-stdin",
        "--json",
        stdin=PASSWORD,
    )
    assert as_json.json() == {"name": "bob", "groups": ["ops"]}

    listed = (await invoke(cli_env, "users", "list", "--json")).json()
    assert [(u["name"], u["groups"], u["disabled"]) for u in listed] == [
        ("alice", ["finance", "ops"], False),
        ("bob", ["ops"], False),
    ]
    assert PASSWORD not in str(listed)
    text = await invoke(cli_env, "users", "list")
    assert "alice  groups: finance, ops" in text.stdout

    disabled = await invoke(cli_env, "users", "disable", "bob")
    assert disabled.code == 0, disabled.stderr
    assert await engine.accounts.authenticate("bob", PASSWORD) is None
    assert (await invoke(cli_env, "users", "disable", "bob")).code == 4


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stdin", "args", "code", "message"),
    [
        (PASSWORD, ["alice", "--group", "ops"], 2, "--password-stdin"),
        ("short\n", ["alice", "--group", "ops", "--password-stdin"], 2, "12 to 1024"),
        (PASSWORD, ["alice", "--password-stdin"], 2, "at least one group"),
        (PASSWORD, ["Alice", "--group", "ops", "--password-stdin"], 2, "invalid user name"),
        (PASSWORD, ["taken", "--group", "ops", "--password-stdin"], 3, "already exists"),
    ],
)
async def test_cli_users_add_errors_are_one_line_with_their_exit_code(
    engine: Engine, cli_env: dict[str, str], stdin: str, args: list[str], code: int, message: str
) -> None:
    await engine.accounts.add_user("taken", PASSWORD, ["ops"])
    # In process: an exit-code contract (the stdin test above runs the real command).
    result = await invoke(cli_env, "users", "add", *args, stdin=stdin)
    assert result.code == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert message in lines[0]
    assert result.stdout == ""
    assert [u.name for u in await engine.accounts.users()] == ["taken"]


@pytest.mark.slow
async def test_cli_token_secret_is_printed_once_and_verifies(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    created = await invoke(
        cli_env, "tokens", "create", "ci-bot", "--group", "ops", "--service", "--as", "cli:root"
    )
    assert created.code == 0, created.stderr
    secret = created.stdout.strip()
    assert created.stdout == secret + "\n"
    assert "cannot be shown again" in created.stderr
    principal = await engine.accounts.verify_token(secret)
    assert principal == Principal.token("ci-bot", frozenset({"ops"}))

    as_json = await invoke(
        cli_env, "tokens", "create", "deploy", "--group", "ops", "--service", "--json"
    )
    body = as_json.json()
    assert set(body) == {"name", "token", "groups", "owner"}
    assert (body["name"], body["groups"], body["owner"]) == ("deploy", ["ops"], None)
    assert await engine.accounts.verify_token(body["token"]) is not None

    listed = await invoke(cli_env, "tokens", "list", "--json")
    tokens = {t["name"]: t for t in listed.json()}
    assert set(tokens) == {"ci-bot", "deploy"}
    assert tokens["ci-bot"]["created_by"] == "cli:root"
    assert tokens["deploy"]["created_by"].startswith("cli:")
    assert tokens["ci-bot"]["revoked_at"] is None
    text = await invoke(cli_env, "tokens", "list")
    for shown in (listed.stdout, text.stdout):
        assert secret not in shown
        assert body["token"] not in shown

    taken = await invoke(cli_env, "tokens", "create", "ci-bot", "--group", "ops", "--service")
    assert (taken.code, taken.stdout) == (3, "")
    invalid = await invoke(cli_env, "tokens", "create", "ci bot", "--group", "ops", "--service")
    assert (invalid.code, invalid.stdout) == (2, "")


@pytest.mark.slow
async def test_cli_revokes_a_token(engine: Engine, cli_env: dict[str, str]) -> None:
    secret = await engine.accounts.create_token("ci-bot", ["ops"], "cli:root", owner=None)
    revoked = await invoke(cli_env, "tokens", "revoke", "ci-bot")
    assert revoked.code == 0, revoked.stderr
    assert revoked.stdout == "token ci-bot revoked\n"
    assert await engine.accounts.verify_token(secret) is None
    (listed,) = (await invoke(cli_env, "tokens", "list", "--json")).json()
    assert listed["revoked_at"] is not None

    again = await invoke(cli_env, "tokens", "revoke", "ci-bot")
    assert again.code == 4
    assert again.stderr == "error: no unrevoked token named 'ci-bot'\n"
    missing = await invoke(cli_env, "tokens", "revoke", "nobody")
    assert missing.code == 4


@pytest.mark.slow
async def test_cli_creates_a_token_for_an_owner_and_refuses_a_missing_one(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    await engine.accounts.add_user("alice", PASSWORD, ["support"])
    created = await invoke(
        cli_env, "tokens", "create", "alice-bot", "--group", "support", "--owner", "alice"
    )
    assert created.code == 0, created.stderr
    assert "owner: alice" in created.stderr
    principal = await engine.accounts.verify_token(created.stdout.strip())
    assert principal is not None
    assert principal.person == "local:alice"
    (listed,) = (await invoke(cli_env, "tokens", "list", "--json")).json()
    assert listed["owner"] == "alice"
    assert "owner: alice" in (await invoke(cli_env, "tokens", "list")).stdout

    for args, message in [
        (["--owner", "nobody"], "no enabled local account"),
        ([], "--owner USER"),
        (["--owner", "alice", "--service"], "--owner USER"),
    ]:
        refused = await invoke(cli_env, "tokens", "create", "bot", "--group", "support", *args)
        assert (refused.code, refused.stdout) == (2, ""), refused.stderr
        assert message in refused.stderr
    assert [t.name for t in await engine.accounts.tokens()] == ["alice-bot"]
