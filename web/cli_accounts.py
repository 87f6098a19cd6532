"""``approvals users`` and ``approvals tokens``: local accounts and API tokens.

Passwords are read from stdin only (``--password-stdin``), never from the command line, where
they would land in shell history and in every process listing. A token's secret is printed
once, when it is created; the database keeps only its digest.

Exit codes follow the CLI's: 2 invalid input, 3 the name is taken, 4 no such token or user.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from approvals.accounts import validate_groups
from web.engine import Engine

users_app = typer.Typer(no_args_is_help=True, help="Local accounts that sign in to the web app.")
tokens_app = typer.Typer(no_args_is_help=True, help="API tokens for programmatic approvers.")

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
# Optional to typer, so that a missing group is the engine's one-line error (exit 2).
Groups = Annotated[
    list[str] | None,
    typer.Option("--group", help="A group it belongs to (at least one; repeat for more)."),
]

# web.cli registers these sub-apps, so its helpers are imported when a command runs, once
# web.cli is fully loaded, rather than at import time (which would be circular).


def _read_password() -> str:
    """One line from stdin, without its line ending."""
    line = sys.stdin.readline()
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
    from web.cli import EXIT_INVALID, default_principal, emit_json, fail, run_async

    if not password_stdin:
        fail(
            "pass --password-stdin and the password on stdin; passwords are never taken from"
            " the command line",
            EXIT_INVALID,
        )
    password = _read_password()

    async def main(engine: Engine) -> dict[str, Any]:
        principal = await engine.accounts.add_user(
            name, password, groups or [], by=by or default_principal()
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
    from web.cli import emit_listing, run_async

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
    """Stop an account from signing in. Exit 4: no enabled account of that name."""
    from web.cli import EXIT_NOT_FOUND, default_principal, fail, run_async

    async def main(engine: Engine) -> bool:
        return await engine.accounts.disable_user(name, by=by or default_principal())

    if not run_async(main):
        fail(f"no enabled user named {name!r}", EXIT_NOT_FOUND)
    typer.echo(f"user {name} disabled")


@tokens_app.command("create")
def tokens_create(
    name: Annotated[str, typer.Argument(help="The token's name (who uses it, e.g. ci-bot).")],
    groups: Groups = None,
    by: Annotated[
        str | None, typer.Option("--as", help="Who creates it (default cli:$USER).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Create an API token and print its secret: it is shown this once, and never again."""
    from web.cli import default_principal, emit_json, run_async

    async def main(engine: Engine) -> dict[str, Any]:
        members = groups or []
        secret = await engine.accounts.create_token(name, members, by or default_principal())
        return {"name": name, "token": secret, "groups": validate_groups(members)}

    created = run_async(main)
    if as_json:
        emit_json(created)
        return
    # The secret alone on stdout, so that `TOKEN=$(approvals tokens create ...)` works.
    typer.echo(created["token"])
    typer.echo(
        f"token {name} created (groups: {', '.join(created['groups'])}); store the secret"
        " now, it cannot be shown again",
        err=True,
    )


@tokens_app.command("list")
def tokens_list(as_json: JsonOption = False) -> None:
    """List API tokens (never their secrets)."""
    from web.cli import emit_listing, run_async

    async def main(engine: Engine) -> list[dict[str, Any]]:
        return [
            {
                "name": t.name,
                "groups": sorted(t.groups),
                "created_by": t.created_by,
                "created_at": t.created_at.isoformat(),
                "revoked_at": t.revoked_at.isoformat() if t.revoked_at else None,
            }
            for t in await engine.accounts.tokens()
        ]

    def line(t: dict[str, Any]) -> str:
        state = f"revoked {t['revoked_at']}" if t["revoked_at"] else "active"
        return (
            f"{t['name']}  groups: {', '.join(t['groups'])}  created by {t['created_by']}  {state}"
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
    from web.cli import EXIT_NOT_FOUND, default_principal, fail, run_async

    async def main(engine: Engine) -> bool:
        return await engine.accounts.revoke_token(name, by=by or default_principal())

    if not run_async(main):
        fail(f"no unrevoked token named {name!r}", EXIT_NOT_FOUND)
    typer.echo(f"token {name} revoked")
