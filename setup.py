"""The build's one step beyond pyproject.toml: the migrations go into the wheel.

``alembic/`` (beside ``alembic.ini`` at the repository's root) is where migrations are written
(``alembic revision``). A wheel has no repository root, so ``build_py`` copies the migration
environment and its versions into the built ``storage`` package as ``storage/migrations``,
where ``storage.migrate`` finds them with ``importlib.resources``. No top-level ``alembic``
package is built: that name is the Alembic library's.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

MIGRATIONS = Path(__file__).resolve().parent / "alembic"


class BuildWithMigrations(build_py):
    """``build_py``, then ``alembic/``'s ``env.py``, ``script.py.mako`` and ``versions/*.py``
    copied to ``storage/migrations/`` of the build."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            # An editable install runs from the checkout, where alembic/ is read in place.
            return
        target = Path(self.build_lib) / "storage" / "migrations"
        for source in sorted(MIGRATIONS.rglob("*")):
            if source.is_dir() or "__pycache__" in source.parts:
                continue
            if source.suffix not in {".py", ".mako"}:
                continue
            copied = target / source.relative_to(MIGRATIONS)
            copied.parent.mkdir(parents=True, exist_ok=True)
            self.copy_file(str(source), str(copied))


setup(cmdclass={"build_py": BuildWithMigrations})
