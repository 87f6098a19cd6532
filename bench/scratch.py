"""A scratch database for a bench: created on ``APPROVALS_DATABASE_URL``'s server (or the embedded
one), migrated, and dropped afterwards."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


async def admin(url: str, statement: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(statement)


@dataclass(frozen=True)
class Scratch:
    url: str
    where: str
    #: DBOS's system database, on the same server (``None``: DBOS is not installed).
    dbos_url: str | None


@asynccontextmanager
async def scratch_database(with_dbos: bool) -> AsyncIterator[Scratch]:
    from storage.migrate import upgrade

    admin_url = os.environ.get("APPROVALS_DATABASE_URL")
    where = "APPROVALS_DATABASE_URL"
    if not admin_url:
        from storage.embedded import start_embedded

        data_dir = ROOT / ".approvals" / "bench-pg"
        admin_url = await asyncio.to_thread(start_embedded, data_dir)
        where = f"embedded ({data_dir})"
    name = f"approvals_bench_{os.getpid()}"
    names = [name, f"{name}_dbos"] if with_dbos else [name]
    for n in names:
        await admin(admin_url, f"DROP DATABASE IF EXISTS {n} WITH (FORCE)")
        await admin(admin_url, f"CREATE DATABASE {n}")
    try:
        url = with_database(admin_url, name)
        await upgrade(url)
        dbos_url = with_database(admin_url, names[1]) if with_dbos else None
        yield Scratch(url, f"{where}, scratch database {name}", dbos_url)
    finally:
        for n in names:
            await admin(admin_url, f"DROP DATABASE IF EXISTS {n} WITH (FORCE)")
