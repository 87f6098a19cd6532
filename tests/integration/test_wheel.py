"""The wheel is the product: built from this checkout, installed (not editable) in a fresh venv,
run from another directory, it migrates a fresh database from the migrations it carries and
pauses the demo refund.

The fresh venv takes the third-party dependencies from the test's own venv (a path file, so
nothing is downloaded but the build's setuptools), never this checkout's packages: every import
of ``approvals``, ``graphs``, ``storage`` and ``web`` must come from the installed wheel.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.db_pool import admin_statement, with_database

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("approvals", "graphs", "storage", "web")


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done.stdout


#: What a build reads: the packages, the migrations and the project's files.
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "alembic.ini", "alembic",
           *PACKAGES)  # fmt: skip


def build_wheel(out: Path) -> Path:
    """The wheel, built from a copy of the sources (a build in the checkout would leave its
    build/ there, whose stale files a later build would pack)."""
    source = out / "source"
    for name in SOURCES:
        if (ROOT / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            source.mkdir(exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    run(sys.executable, "-m", "pip", "wheel", source, "--no-deps", "-q", "-w", out, cwd=out)
    [wheel] = out.glob("approvals_engine-*.whl")
    return wheel


def fresh_venv(where: Path, wheel: Path) -> Path:
    run(sys.executable, "-m", "venv", "--without-pip", where, cwd=where.parent)
    python = where / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "-q", wheel,
        cwd=where.parent)  # fmt: skip
    # The dependencies: this venv's site-packages as a plain path (its .pth files, among them
    # the checkout's editable install, are not read from there).
    [target] = (where / "lib").glob("python3*/site-packages")
    (target / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


async def test_the_wheel_installs_migrates_and_pauses_the_demo_refund(
    tmp_path: Path, admin_url: str
) -> None:
    wheel = await asyncio.to_thread(build_wheel, tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names if "/" in n and ".dist-info/" not in n}
    assert tops == set(PACKAGES), tops  # no top-level alembic, tests or bench
    assert "storage/migrations/env.py" in names
    assert any(n.startswith("storage/migrations/versions/0001_") for n in names)

    python = await asyncio.to_thread(fresh_venv, tmp_path / "venv", wheel)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    found = run(python, "-c", "import approvals, graphs, storage, web;"
                "print([m.__file__ for m in (approvals, graphs, storage, web)])",
                cwd=elsewhere)  # fmt: skip
    for path in json.loads(found.replace("'", '"')):
        assert path.startswith(str(tmp_path / "venv")), path

    name = "approvals_wheel_test"
    await admin_statement(admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    await admin_statement(admin_url, f"CREATE DATABASE {name}")
    try:
        env = {
            "PATH": f"{tmp_path / 'venv' / 'bin'}:/usr/bin:/bin",
            "HOME": str(tmp_path),
            "APPROVALS_DATABASE_URL": with_database(admin_url, name),
            "APPROVALS_DATA_DIR": str(tmp_path / "data"),
            "APPROVALS_CONFIG_FILE": str(tmp_path / "none.toml"),
            "APPROVALS_EXAMPLES": "true",
        }
        approvals = tmp_path / "venv" / "bin" / "approvals"
        await asyncio.to_thread(run, approvals, "db", "upgrade", cwd=elsewhere, env=env)
        started = await asyncio.to_thread(
            run, approvals, "runs", "start", "refund", "--input", '{"message": "refund 1001"}',
            "--as", "cli:alice", cwd=elsewhere, env=env,
        )  # fmt: skip
        run_view = json.loads(started)
        assert run_view["status"] == "waiting", run_view
        assert len(run_view["pending"]) == 1
    finally:
        await admin_statement(admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
