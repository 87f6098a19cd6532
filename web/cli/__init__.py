"""The ``approvals`` command line: a composition root like the web app.

This module assembles the commands; each group lives in its own module (``runs``, ``pending``,
``tools``, ``db``, ``serve``, ``accounts``, ``audit``, ``notifications``, ``retention``,
``outcomes``, ``policy``, ``grants``) and takes what every command shares (exit codes,
output, opening the engine) from ``web.cli.command``. Exit codes: 0 success, 1 failure
(database unreachable, run failed), 2 invalid input, 3 conflict (request no longer pending,
thread still waiting, run already ended), 4 not found.
"""

from __future__ import annotations

import sys

import typer

from approvals import json_values
from web.cli.accounts import sessions_app, tokens_app, users_app
from web.cli.audit import audit_app
from web.cli.command import EXIT_INVALID
from web.cli.db import db_app
from web.cli.grants import grants_app
from web.cli.notifications import notifications_app
from web.cli.outcomes import outcomes_app
from web.cli.pending import decide_command, pending_app
from web.cli.policy import policy_app
from web.cli.retention import retention_app
from web.cli.runs import runs_app
from web.cli.serve import demo_command, serve_command, worker_command
from web.cli.status import status_command
from web.cli.tools import tools_app

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="approvals: durable human approval for AI agents' sensitive tool calls.",
)
# `approvals --help` lists the commands, then the groups, in the order they are added here.
app.command("decide")(decide_command)
app.command("worker")(worker_command)
app.command("serve")(serve_command)
app.command("demo")(demo_command)
app.command("status")(status_command)
app.add_typer(db_app, name="db")
app.add_typer(runs_app, name="runs")
app.add_typer(pending_app, name="pending")
app.add_typer(grants_app, name="grants")
app.add_typer(tools_app, name="tools")
app.add_typer(policy_app, name="policy")
app.add_typer(users_app, name="users")
app.add_typer(tokens_app, name="tokens")
app.add_typer(sessions_app, name="sessions")
app.add_typer(retention_app, name="retention")
app.add_typer(audit_app, name="audit")
app.add_typer(outcomes_app, name="outcomes")
app.add_typer(notifications_app, name="notifications")


def main() -> None:
    """Entry point of the ``approvals`` script."""
    check_argv(sys.argv[1:])
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover - interactive
        sys.exit(130)


def check_argv(args: list[str]) -> None:
    """Exit 2 before anything is done when an argument is not text the engine can store or
    send: bytes that are not UTF-8 reach Python as lone surrogates (a token's name, a reason),
    which the database would refuse only once the command had begun."""
    for position, arg in enumerate(args, 1):
        if json_values.text_problem(arg) is not None:
            typer.echo(f"error: argument {position} {arg!a} is not valid UTF-8 text", err=True)
            sys.exit(EXIT_INVALID)
