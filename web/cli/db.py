"""``approvals db``: the database schema (migrations) and the runtime role's grants."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from web.cli.command import (
    database_url,
    emit_json,
    guarded,
    load_settings,
    migration_url,
    run_loop,
    upgrade_schema,
)

if TYPE_CHECKING:
    from web.engine import Grant

db_app = typer.Typer(no_args_is_help=True, help="Database schema.")


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply the engine's migrations and LangGraph's checkpoint tables (idempotent)."""

    async def main() -> None:
        settings = load_settings()
        url, _ = database_url(settings)
        await upgrade_schema(migration_url(settings, url), runtime_role=settings.runtime_role)

    guarded(lambda: run_loop(main()))
    typer.echo("database is up to date")


@db_app.command("grant")
def db_grant(
    role: Annotated[str, typer.Argument(help="The role serve, workers and the CLI connect as.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Grant ROLE exactly what the engine needs and no ownership (run with the owner's URL,
    APPROVALS_MIGRATION_DATABASE_URL; again after each upgrade, or set APPROVALS_RUNTIME_ROLE)."""

    async def main() -> list[Grant]:
        # Imported here, not at the top: the engine takes about 0.5 s to import, and only the
        # command that grants needs this part of it.
        from web.engine import grant_runtime

        settings = load_settings()
        url, _ = database_url(settings)
        return await grant_runtime(migration_url(settings, url), role)

    grants = guarded(lambda: run_loop(main()))
    if as_json:
        emit_json({"role": role, "grants": [g.to_json() for g in grants]})
        return
    for grant in grants:
        typer.echo(f"{grant.object}: {grant.privileges}")
    typer.echo(f"role {role} holds only these privileges on the engine's objects and owns none")
