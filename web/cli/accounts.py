"""``approvals users``, ``tokens`` and ``sessions``: local accounts, API tokens, web sessions.

Passwords are read from stdin only (``--password-stdin``), never from the command line, where
they would land in shell history and in every process listing. A token's secret is printed
once, when it is created; the database keeps only its digest.

Exit codes follow the CLI's: 2 invalid input, 3 the name (or the Slack user) is taken, 4 no
such token or user.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from approvals.accounts import validate_groups
from web.cli.command import (
    EXIT_INVALID,
    EXIT_NOT_FOUND,
    EXIT_NOT_PENDING,
    acting,
    emit_json,
    emit_listing,
    fail,
    run_async,
)

if TYPE_CHECKING:
    from web.engine import Engine

users_app = typer.Typer(no_args_is_help=True, help="Local accounts that sign in to the web app.")
tokens_app = typer.Typer(
    no_args_is_help=True, help="API tokens: a person's (--owner), or a service's (--service)."
)

#: A Slack user id: U..., or W... on Enterprise Grid (migration 0032 checks the same).
SLACK_USER_ID = re.compile(r"[UW][A-Z0-9]{2,30}")
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
# Optional to typer, so that a missing group is the engine's one-line error (exit 2).
Groups = Annotated[
    list[str] | None,
    typer.Option("--group", help="A group it belongs to (at least one; repeat for more)."),
]


def _read_password() -> str:
    """One line from stdin, without its line ending; exit 2 when there is no stdin to read or
    its bytes are no text."""
    if sys.stdin is None:
        fail("--password-stdin: standard input is closed; give the password on it", EXIT_INVALID)
    try:
        line = sys.stdin.readline()
    except (UnicodeDecodeError, OSError) as exc:
        fail(f"--password-stdin: the password could not be read as text ({exc})", EXIT_INVALID)
    return line.removesuffix("\n").removesuffix("\r")


@users_app.command("add")
def users_add(
    name: Annotated[str, typer.Argument(help="The account's name (sign-in name).")],
    groups: Groups = None,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from stdin (one line).")
    ] = False,
    by: Annotated[
        str | None, typer.Option("--as", help="Who creates it (default cli:$USER).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Create a local account; its password is read from stdin."""

    if not password_stdin:
        fail(
            "pass --password-stdin and the password on stdin; passwords are never taken from"
            " the command line",
            EXIT_INVALID,
        )
    password = _read_password()

    async def main(engine: Engine) -> dict[str, Any]:
        principal = await engine.accounts.add_user(
            name, password, groups or [], by=await acting(engine, by)
        )
        return {"name": principal.name, "groups": sorted(principal.groups)}

    created = run_async(main)
    if as_json:
        emit_json(created)
        return
    typer.echo(f"user {created['name']} created (groups: {', '.join(created['groups'])})")


@users_app.command("list")
def users_list(as_json: JsonOption = False) -> None:
    """List local accounts (never their passwords)."""

    async def main(engine: Engine) -> list[dict[str, Any]]:
        return [user.to_json() for user in await engine.accounts.users()]

    def line(user: dict[str, Any]) -> str:
        state = "  disabled" if user["disabled"] else ""
        return f"{user['name']}  groups: {', '.join(user['groups'])}{state}"

    emit_listing(run_async(main), as_json=as_json, empty="no local accounts", line=line)


@users_app.command("disable")
def users_disable(
    name: str,
    by: Annotated[
        str | None, typer.Option("--as", help="Who disables it (default cli:$USER).")
    ] = None,
) -> None:
    """Stop an account from signing in, and end its web sessions at once. Exit 4: no enabled
    account of that name."""

    async def main(engine: Engine) -> bool:
        # The same statement ends its web sessions (the users_end_sessions trigger).
        return await engine.accounts.disable_user(name, by=await acting(engine, by))

    if not run_async(main):
        fail(f"no enabled user named {name!r}", EXIT_NOT_FOUND)
    typer.echo(f"user {name} disabled; its web sessions have ended")


@users_app.command("groups")
def users_groups(
    name: str,
    groups: Groups = None,
    by: Annotated[
        str | None, typer.Option("--as", help="Who changes them (default cli:$USER).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Replace an account's groups (at least one --group). Its web sessions end, so that no
    session goes on deciding for a group it left. Exit 4: no account of that name."""

    async def main(engine: Engine) -> dict[str, Any] | None:
        changed = await engine.accounts.set_groups(name, groups or [], by=await acting(engine, by))
        return {"name": name, "groups": sorted(changed.groups)} if changed else None

    result = run_async(main)
    if result is None:
        fail(f"no user named {name!r}", EXIT_NOT_FOUND)
    if as_json:
        emit_json(result)
        return
    typer.echo(
        f"user {name} now in groups: {', '.join(result['groups'])}; its web sessions have ended"
    )


@users_app.command("link")
def users_link(
    name: Annotated[str, typer.Argument(help="The account's name.")],
    slack: Annotated[
        str | None,
        typer.Option(
            "--slack",
            help="Its Slack user id (UXXXXXXXX: the member ID in the user's Slack profile).",
        ),
    ] = None,
    by: Annotated[
        str | None, typer.Option("--as", help="Who links it (default cli:$USER).")
    ] = None,
) -> None:
    """Link an account to its user in Slack: that user's clicks on the Slack app's buttons
    then decide as this account, under its rules (docs/notifications.md). Replaces the
    account's earlier link. Exit 2: no --slack, or no Slack user id; 3: the Slack user is
    another account's; 4: no account of that name."""

    if slack is None or not SLACK_USER_ID.fullmatch(slack):
        fail(
            "give the account's Slack user id: --slack UXXXXXXXX (the member ID in the user's"
            " Slack profile)",
            EXIT_INVALID,
        )

    async def main(engine: Engine) -> tuple[bool, str | None, bool]:
        # Imported here, not at the top: the Slack app's module (httpx, Block Kit) is needed
        # by this command alone.
        from web.channels.slack_app import SlackDesk

        desk = SlackDesk.on(engine.adapters.db, engine.settings)
        done = await desk.links.link(name, slack, by=await acting(engine, by))
        return done.found, done.taken, done.linked

    found, taken, linked = run_async(main)
    if not found:
        fail(f"no user named {name!r}", EXIT_NOT_FOUND)
    if taken is not None or not linked:
        fail(f"the Slack user {slack} is linked to the account {taken!r}", EXIT_NOT_PENDING)
    typer.echo(f"user {name} linked to the Slack user {slack}")


sessions_app = typer.Typer(
    no_args_is_help=True, help="Web sessions: who is signed in, and ending their sessions."
)
_PRINCIPAL_PREFIXES = ("local:", "oidc:")


def _principal_id(value: str) -> str:

    if not value.startswith(_PRINCIPAL_PREFIXES) or value in _PRINCIPAL_PREFIXES:
        fail(
            f"{value[:200]!r} is not a principal id: give local:NAME or oidc:ISSUER#SUBJECT"
            " (as `approvals sessions list` shows them)",
            EXIT_INVALID,
        )
    return value


@sessions_app.command("list")
def sessions_list(
    principal: Annotated[
        str | None, typer.Option("--principal", help="Only this principal's sessions.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List live web sessions (never their ids), newest first."""

    wanted = _principal_id(principal) if principal is not None else None

    async def main(engine: Engine) -> list[dict[str, Any]]:
        return [s.to_json() for s in await engine.sessions.live(wanted)]

    def line(s: dict[str, Any]) -> str:
        return (
            f"{s['principal']}  groups: {', '.join(s['groups'])}  since {s['created_at']}"
            f"  last seen {s['last_seen_at']}  until {s['expires_at']}"
        )

    emit_listing(run_async(main), as_json=as_json, empty="no live web sessions", line=line)


@sessions_app.command("end")
def sessions_end(
    principal: Annotated[
        str, typer.Argument(help="The principal: local:NAME or oidc:ISSUER#SUBJECT.")
    ],
    by: Annotated[
        str | None, typer.Option("--as", help="Who ends them (default cli:$USER).")
    ] = None,
) -> None:
    """End every web session of a principal at once (for an OpenID Connect user whose access
    was withdrawn at the provider, say); the audit log records it. Ending none is not an
    error."""

    wanted = _principal_id(principal)

    async def main(engine: Engine) -> int:
        return await engine.sessions.end_principal(wanted, by=await acting(engine, by))

    ended = run_async(main)
    typer.echo(f"{ended} web session{'' if ended == 1 else 's'} of {wanted} ended")


@tokens_app.command("create")
def tokens_create(
    name: Annotated[str, typer.Argument(help="The token's name (who uses it, e.g. ci-bot).")],
    groups: Groups = None,
    owner: Annotated[
        str | None,
        typer.Option(
            "--owner",
            help="The local account it acts for: it counts as that person (who may not approve"
            " what they started, and votes once) and never holds more groups than they do.",
        ),
    ] = None,
    service: Annotated[
        bool,
        typer.Option(
            "--service", help="A service token, owned by no one: it starts runs, never decides."
        ),
    ] = False,
    by: Annotated[
        str | None, typer.Option("--as", help="Who creates it (default cli:$USER).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Create an API token and print its secret: it is shown this once, and never again.

    Give it an --owner, or say --service. Exit 2: invalid name or group, no enabled account of
    the owner's name, or a group the owner is not in; 3: the name is taken."""

    # Explicit either way: a token that silently could not decide, or silently could, is a
    # surprise found late.
    if (owner is None) == (not service):
        fail(
            "say whose token it is: --owner USER (a person's token) or --service (starts runs,"
            " never decides)",
            EXIT_INVALID,
        )

    async def main(engine: Engine) -> dict[str, Any]:
        members = groups or []
        secret = await engine.accounts.create_token(
            name, members, await acting(engine, by), owner=owner
        )
        return {
            "name": name,
            "token": secret,
            "groups": validate_groups(members),
            "owner": owner,
        }

    created = run_async(main)
    if as_json:
        emit_json(created)
        return
    # The secret alone on stdout, so that `TOKEN=$(approvals tokens create ...)` works.
    typer.echo(created["token"])
    whose = f"owner: {owner}" if owner is not None else "a service token: it never decides"
    typer.echo(
        f"token {name} created (groups: {', '.join(created['groups'])}; {whose}); store the"
        " secret now, it cannot be shown again",
        err=True,
    )


@tokens_app.command("list")
def tokens_list(as_json: JsonOption = False) -> None:
    """List API tokens (never their secrets)."""

    async def main(engine: Engine) -> list[dict[str, Any]]:
        return [
            {
                "name": t.name,
                "groups": sorted(t.groups),
                "owner": t.owner,
                "created_by": t.created_by,
                "created_at": t.created_at.isoformat(),
                "revoked_at": t.revoked_at.isoformat() if t.revoked_at else None,
            }
            for t in await engine.accounts.tokens()
        ]

    def line(t: dict[str, Any]) -> str:
        state = f"revoked {t['revoked_at']}" if t["revoked_at"] else "active"
        whose = f"owner: {t['owner']}" if t["owner"] else "service"
        return (
            f"{t['name']}  groups: {', '.join(t['groups'])}  {whose}  created by"
            f" {t['created_by']}  {state}"
        )

    emit_listing(run_async(main), as_json=as_json, empty="no API tokens", line=line)


@tokens_app.command("revoke")
def tokens_revoke(
    name: str,
    by: Annotated[
        str | None, typer.Option("--as", help="Who revokes it (default cli:$USER).")
    ] = None,
) -> None:
    """Revoke an API token at once. Exit 4: no unrevoked token of that name."""

    async def main(engine: Engine) -> bool:
        return await engine.accounts.revoke_token(name, by=await acting(engine, by))

    if not run_async(main):
        fail(f"no unrevoked token named {name!r}", EXIT_NOT_FOUND)
    typer.echo(f"token {name} revoked")
