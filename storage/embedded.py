"""Zero-config embedded PostgreSQL from the ``pgserver`` wheel (the ``embedded`` extra).

``start_embedded(data_dir)`` initialises ``data_dir`` on first use, starts a server listening only
on a Unix socket (no TCP port) and returns a libpq URL. The server outlives the process, so a
later ``approvals decide`` reuses the server ``approvals demo`` started. Stop it with
``stop_embedded(data_dir)`` (or ``pg_ctl -D DATA_DIR stop`` run as the owner of DATA_DIR).

PostgreSQL refuses to run as root. Under root, pgserver creates (``useradd``) a system user
``pgserver``, chowns ``data_dir`` to it, makes ``data_dir``'s ancestors and the bundled binaries
world-traversable (o+rx), and runs initdb/pg_ctl as that user. A data dir created by root
is therefore owned by ``pgserver`` and cannot be reused by another unprivileged user.
"""

from __future__ import annotations

import functools
import os
import subprocess
import warnings
from pathlib import Path
from types import ModuleType
from urllib.parse import quote

from approvals.errors import ConfigurationError

__all__ = ["EmbeddedPostgresUnavailable", "start_embedded", "stop_embedded"]

_SUPERUSER = "postgres"


class EmbeddedPostgresUnavailable(ConfigurationError):
    """The embedded PostgreSQL cannot be used (pgserver missing, or it failed to start)."""


def _pgserver() -> ModuleType:
    try:
        with warnings.catch_warnings():
            # platformdirs warns (RuntimeDirWarning) at pgserver import when XDG_RUNTIME_DIR is
            # unset; under pytest's filterwarnings=error that would break the import.
            warnings.simplefilter("ignore")
            import pgserver
    except ImportError as exc:
        raise EmbeddedPostgresUnavailable(
            "embedded PostgreSQL is not available (pgserver is not installed): "
            "install the 'embedded' extra or set APPROVALS_DATABASE_URL"
        ) from exc
    return pgserver


def _clear_stale_pidfile(data_dir: Path) -> None:
    """Drop a postmaster.pid whose pid now belongs to a non-postgres process.

    After a container or machine restart the old pid may be reused; pgserver would then take the
    server for running and postgres would refuse to start. Call with pgserver's lock held.
    """
    import psutil  # type: ignore[import-untyped, unused-ignore]  # a dependency of pgserver

    pidfile = data_dir / "postmaster.pid"
    try:
        pid = int(pidfile.read_text().split("\n", 1)[0])
        stale = psutil.Process(pid).name() != "postgres"
    except (OSError, ValueError):
        return  # no (readable) pidfile: nothing to clear
    except psutil.NoSuchProcess:
        stale = False  # dead pid: pgserver and postgres cope with that themselves
    except psutil.Error:
        return
    if stale:
        pidfile.unlink(missing_ok=True)


def _url(socket_dir: Path, port: int, database: str = _SUPERUSER) -> str:
    return (
        f"postgresql://{_SUPERUSER}@/{database}?host={quote(str(socket_dir), safe='/')}&port={port}"
    )


def start_embedded(data_dir: Path) -> str:
    """Start (or reuse) PostgreSQL from the pgserver wheel with its data in data_dir.

    Returns a libpq URL (``postgresql://postgres@/postgres?host=<socket dir>&port=5432``) usable
    by psycopg 3 and SQLAlchemy (``postgresql+psycopg://``); trust auth, superuser ``postgres``.
    Idempotent: a second call (same or another process) reuses the running server.
    """
    pgserver = _pgserver()
    data_dir = Path(data_dir).expanduser().resolve()
    if any(ch.isspace() for ch in str(data_dir)):
        # pgserver passes the socket dir to postgres unquoted (`-o "-k DIR"`).
        raise EmbeddedPostgresUnavailable(f"embedded data dir must not contain spaces: {data_dir}")
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    with pgserver.PostgresServer._lock:
        _clear_stale_pidfile(data_dir)
        # get_server caches a handle per process; drop it so a server stopped since is restarted.
        pgserver.PostgresServer._instances.pop(data_dir, None)
    try:
        # cleanup_mode=None: never stop the server when this process exits.
        server = pgserver.get_server(data_dir, cleanup_mode=None)
    except (subprocess.SubprocessError, OSError, AssertionError) as exc:
        raise EmbeddedPostgresUnavailable(
            f"could not start embedded PostgreSQL in {data_dir} ({exc}); "
            f"see {data_dir / 'log'}, or set APPROVALS_DATABASE_URL"
        ) from exc
    info = server.get_postmaster_info()
    if info.socket_dir is None or info.port is None:
        raise EmbeddedPostgresUnavailable(f"embedded PostgreSQL in {data_dir} has no Unix socket")
    return _url(Path(info.socket_dir), int(info.port))


def stop_embedded(data_dir: Path, timeout: float = 60.0) -> bool:
    """Stop the embedded server in data_dir (fast shutdown). Returns False if it was not running."""
    data_dir = Path(data_dir).expanduser().resolve()
    if not (data_dir / "postmaster.pid").exists():
        return False
    pg_ctl = str(Path(_pgserver()._commands.POSTGRES_BIN_PATH) / "pg_ctl")
    # pg_ctl refuses to run as root: run it as the data dir's owner (pgserver's "pgserver" user).
    user = data_dir.stat().st_uid if os.geteuid() == 0 else None
    run = functools.partial(subprocess.run, capture_output=True, user=user, cwd=data_dir)
    if run([pg_ctl, "-D", str(data_dir), "status"], check=False).returncode != 0:
        return False  # 3: not running (stale postmaster.pid)
    run([pg_ctl, "-D", str(data_dir), "-m", "fast", "-w", "stop"], check=True, timeout=timeout)
    return True
