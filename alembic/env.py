"""Alembic environment: migrations for the engine's own tables (LangGraph owns its own)."""

from __future__ import annotations

from sqlalchemy import create_engine, pool

from alembic import context

url = context.config.attributes.get("url") or context.config.get_main_option("sqlalchemy.url")
if not url:
    raise RuntimeError("no database URL given to alembic; use `approvals db upgrade`")

connectable = create_engine(url, poolclass=pool.NullPool)
with connectable.connect() as connection:
    context.configure(connection=connection, transactional_ddl=True)
    with context.begin_transaction():
        context.run_migrations()
connectable.dispose()
