"""``approvals db upgrade``: the engine's Alembic migrations, then LangGraph's own setup."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
from alembic.config import Config
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import dict_row

from alembic import command
from storage.db import translated_errors

ROOT = Path(__file__).resolve().parent.parent


def alembic_config(url: str) -> Config:
    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "alembic"))
    config.attributes["url"] = sqlalchemy_url(url)
    return config


def sqlalchemy_url(url: str) -> str:
    """The same database, spelled for SQLAlchemy's psycopg 3 dialect."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


async def upgrade(url: str) -> None:
    """Apply every migration and LangGraph's checkpoint tables. Safe to run again."""
    with translated_errors():
        await asyncio.to_thread(command.upgrade, alembic_config(url), "head")
        async with await psycopg.AsyncConnection.connect(
            url, autocommit=True, prepare_threshold=None, row_factory=dict_row
        ) as conn:
            await AsyncPostgresSaver(conn).setup()
