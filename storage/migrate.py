"""``approvals db upgrade``: the engine's Alembic migrations, then LangGraph's own setup, then
the schema files of code outside the core that keeps its own tables (``EXTENSION_SCHEMAS``:
the examples' side-effect table).

Migrations run as the tables' owner (``APPROVALS_MIGRATION_DATABASE_URL`` when runtime processes
connect as a role that owns nothing, see ``storage.roles``). A schema already at head is only
read, so a process connected as the runtime role may call ``upgrade`` at start-up.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import psycopg
from alembic.config import Config
from alembic.script import ScriptDirectory
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import dict_row

from alembic import command
from approvals.errors import ConfigurationError
from storage.db import Row, sql, translated_errors
from storage.roles import grant_runtime

ROOT = Path(__file__).resolve().parent.parent

#: (package, file) of each schema file applied after the migrations, in order. Each is written
#: to be run again (``CREATE ... IF NOT EXISTS``) and owned by its package, not by the engine.
EXTENSION_SCHEMAS: tuple[tuple[str, str], ...] = (("graphs.examples", "schema.sql"),)


def extension_schemas() -> list[str]:
    """The text of each ``EXTENSION_SCHEMAS`` file."""
    return [
        resources.files(package).joinpath(name).read_text(encoding="utf-8")
        for package, name in EXTENSION_SCHEMAS
    ]


def migrations_dir() -> Path:
    """Where the migrations are: ``storage/migrations`` in an installed wheel (``setup.py``
    copies them there at build time), ``alembic/`` beside the package in a checkout."""
    packaged = resources.files("storage").joinpath("migrations")
    if packaged.is_dir():
        return Path(str(packaged))
    return ROOT / "alembic"


def alembic_config(url: str) -> Config:
    """Alembic's configuration for ``url``, built here rather than read from ``alembic.ini``
    (which only the checkout has): the engine logs through its own handlers."""
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("path_separator", "os")
    config.attributes["url"] = sqlalchemy_url(url)
    return config


def sqlalchemy_url(url: str) -> str:
    """The same database, spelled for SQLAlchemy's psycopg 3 dialect."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


@functools.cache
def schema_heads() -> tuple[str | None, int]:
    """The Alembic head revision and LangGraph's latest checkpoint migration."""
    head = ScriptDirectory.from_config(alembic_config("")).get_current_head()
    return head, len(AsyncPostgresSaver.MIGRATIONS) - 1


@dataclass(frozen=True, kw_only=True, slots=True)
class SchemaState:
    """The schema versions applied to the database, and the ones this code expects."""

    revision: str | None
    head: str | None
    checkpoints: int | None
    checkpoints_head: int

    @classmethod
    def from_row(cls, row: Row | None) -> SchemaState:
        """The state ``schema_versions`` read (``None``: no row), against this code's heads."""
        head, checkpoints_head = schema_heads()
        return cls(
            revision=row["revision"] if row else None,
            head=head,
            checkpoints=row["checkpoints"] if row else None,
            checkpoints_head=checkpoints_head,
        )

    @property
    def problem(self) -> str | None:
        """Why the schema is not the one this code needs, or ``None`` when it is."""
        if self.revision != self.head:
            return (
                f"migrations are at {self.revision or 'nothing'}, not at head {self.head};"
                " run `approvals db upgrade`"
            )
        if self.checkpoints is None or self.checkpoints < self.checkpoints_head:
            return "LangGraph's checkpoint tables are not set up; run `approvals db upgrade`"
        return None


async def upgrade(url: str, *, runtime_role: str | None = None) -> None:
    """Apply every migration and LangGraph's checkpoint tables, then (``runtime_role``) grant
    that role what the engine needs on them, new tables included. Safe to run again."""
    with translated_errors():
        behind, connected_as = await _state(url)
        if behind:
            try:
                await asyncio.to_thread(command.upgrade, alembic_config(url), "head")
                async with await psycopg.AsyncConnection.connect(
                    url, autocommit=True, prepare_threshold=None, row_factory=dict_row
                ) as conn:
                    await AsyncPostgresSaver(conn).setup()
                    for schema in extension_schemas():
                        await conn.execute(schema)
            except Exception as exc:
                cause = getattr(exc, "orig", None) or exc
                if not isinstance(cause, psycopg.errors.InsufficientPrivilege):
                    raise
                raise ConfigurationError(
                    "the database schema needs migrating and this role may not"
                    f" ({str(cause).splitlines()[0]}); run `approvals db upgrade` with the"
                    " owner's URL (APPROVALS_MIGRATION_DATABASE_URL)"
                ) from None
    # Connected as the runtime role itself (serve without the migration URL), there is nothing
    # it could grant: the owner's `db upgrade` or `db grant` did, or will.
    if runtime_role and connected_as != runtime_role:
        await grant_runtime(url, runtime_role)


async def _state(url: str) -> tuple[bool, str]:
    """Whether a migration or LangGraph's setup is still to run, and the role connected as
    (reads only)."""
    async with await psycopg.AsyncConnection.connect(
        url, autocommit=True, prepare_threshold=None, row_factory=dict_row
    ) as conn:
        role = await (await conn.execute(sql("connected_role"))).fetchone()
        assert role is not None
        try:
            row = await (await conn.execute(sql("schema_versions"))).fetchone()
        except psycopg.errors.UndefinedTable:
            return True, role["role"]
    return SchemaState.from_row(row).problem is not None, role["role"]
