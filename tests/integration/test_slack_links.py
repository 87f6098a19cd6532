"""``approvals users link NAME --slack UXXXX``: which Slack user is which local account (the
Slack app decides as it). One Slack user is one account; a link is audited, replaced by the
account's next one, and goes with its account."""

from __future__ import annotations

from typing import Any

from tests.integration.helpers import scalar, verified
from tests.integration.processes import cli
from web.channels.slack_app import SlackDesk
from web.engine import Engine
from web.settings import Settings

PASSWORD = "a-long-enough-password"


async def test_link_names_the_account_a_slack_user_decides_as(
    engine: Engine, settings: Settings, cli_env: dict[str, str]
) -> None:
    await engine.accounts.add_user("bob", PASSWORD, ["support"])
    await engine.accounts.add_user("carol", PASSWORD, ["support"])
    links = SlackDesk.on(engine.adapters.db, settings).links

    done = await cli(cli_env, "users", "link", "bob", "--slack", "U0BOB", "--as", "cli:ops")
    assert done.code == 0, done.stderr
    assert await links.account_of("U0BOB") == "bob"

    async def refused(*args: str) -> Any:
        result = await cli(cli_env, "users", "link", *args)
        return result.code, result.stderr

    taken = await refused("carol", "--slack", "U0BOB")
    assert taken[0] == 3
    assert "'bob'" in taken[1]
    assert (await refused("nobody", "--slack", "U0NOBODY"))[0] == 4
    assert (await refused("carol", "--slack", "not-a-slack-id"))[0] == 2
    assert (await refused("carol"))[0] == 2
    assert await links.account_of("U0NOBODY") is None

    # The account's next link replaces its first: one account, one Slack user.
    assert (await links.link("bob", "U0BOBNEW", by="cli:ops")).linked
    assert await links.account_of("U0BOB") is None
    assert await links.account_of("U0BOBNEW") == "bob"
    audited = await scalar(
        engine,
        "SELECT json_agg(json_build_array(principal, data->>'name', data->>'slack_user')"
        " ORDER BY id) FROM audit_events WHERE kind = 'account.slack_linked'",
    )
    assert audited == [["cli:ops", "bob", "U0BOB"], ["cli:ops", "bob", "U0BOBNEW"]]
    await verified(engine)

    async with engine.connection() as conn:
        await conn.execute("DELETE FROM users WHERE name = 'bob'")
    assert await links.account_of("U0BOBNEW") is None
