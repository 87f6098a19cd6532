# Developer and CI entry points. Everything runs from the project venv in .venv.
#   make test   lint + import contracts, then pytest beside type-check and make compat
#               (APPROVALS_TEST_DATABASE_URL=postgresql://... to use an existing server,
#                unset to use the embedded one)
#   make test-deep  the property tests (Hypothesis) on ten times the examples make test runs
#   make demo   run the demo;  make bench   run the benchmarks;  make soak   kill processes, count
#   make compat the peers' own suites (HumanInTheLoopMiddleware's, ToolNode's) on our classes
#   make fmt    auto-format
#   make js-sdk the JS LangGraph SDK (and node, if need be) the JS test drives; make test runs it
#   make schema rewrite storage/sql/schema.sql from a freshly migrated database (after a migration)

PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The install stamp is keyed to pyproject.toml's content: edit the dependencies and the next
# target that needs the venv re-runs pip; otherwise it costs nothing.
STAMP := $(VENV)/.install-$(firstword $(shell cksum pyproject.toml))

.DEFAULT_GOAL := test
.PHONY: venv install test test-deep lint fmt demo bench soak browser js-sdk schema compat

venv: $(BIN)/python

$(BIN)/python:
	@$(PY) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
		|| { echo "error: $(PY) is older than 3.11 (set PY=python3.11 or newer)" >&2; exit 1; }
	$(PY) -m venv $(VENV)

install: $(STAMP)

$(STAMP): | $(BIN)/python
	$(BIN)/python -m pip install --disable-pip-version-check -q -e '.[dev]'
	@rm -f $(VENV)/.install-*
	@touch $@

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# The browser tests drive Debian's chromium (Playwright cannot download its own browser here).
# As root, a missing chromium is installed with apt; otherwise make stops before the tests with
# the one command that installs it.
CHROMIUM ?= /usr/bin/chromium

browser:
	@test -x $(CHROMIUM) || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "installing chromium (apt) for the browser tests"; \
			DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null && \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null; \
		else \
			echo "error: the browser tests need chromium: run 'sudo apt-get install -y chromium' and retry" >&2; \
			exit 1; \
		fi; }
	@test -x $(CHROMIUM) || { echo "error: $(CHROMIUM) is still missing after apt-get install chromium" >&2; exit 1; }

# The JS SDK test (tests/web/test_langgraph_js.py) runs @langchain/langgraph-sdk with node: the
# version tests/js/package-lock.json pins, installed by npm ci into .cache/js-sdk (or the
# directory APPROVALS_JS_SDK names) once per lock. As root, a missing node is installed with apt;
# otherwise make stops before the tests with the one command to run (tests/js/install.sh).
JS_SDK := $(or $(APPROVALS_JS_SDK),.cache/js-sdk)

js-sdk:
	@tests/js/install.sh $(JS_SDK)

# The tests run in pytest-xdist workers, two per core: most of a test's time is spent waiting on
# PostgreSQL, a served app or a child process, not on its own CPU (at one worker per core the
# suite used about a third of two cores; two per core took it from 4m34s to 3m19s here). Each
# worker migrates its own template database and copies it per test. PYTEST_WORKERS=0 runs them
# in this one process.
PYTEST_WORKERS ?= $(shell $(PY) -c 'import os; print(2 * (os.cpu_count() or 1))')

# The pytest plugins the suite uses, loaded by name with PYTEST_DISABLE_PLUGIN_AUTOLOAD: the other
# installed ones (langsmith's, platformdirs') stay out, and pytest no longer rewrites the assertions
# of every module of each plugin's package in each worker (schemathesis' and langsmith's came to 470
# modules; collecting went from 11.2 to 8.7 s a worker). The packages are compiled first: where
# PYTHONDONTWRITEBYTECODE is set, every worker and every `approvals` the tests start compiled them.
# For the same reason pytest runs without it: it then keeps the test modules it rewrote (their
# assertions) in __pycache__, and a worker collects the suite in 10 s instead of 20.
PYTEST_PLUGINS = -p pytest_asyncio.plugin -p xdist.plugin -p pytest_timeout -p anyio.pytest_plugin \
	-p _hypothesis_pytestplugin -p schemathesis.pytest.plugin -p agent_hooks.ctk.plugin
PYTEST = env -u PYTHONDONTWRITEBYTECODE PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 $(BIN)/pytest

# mypy (a minute and a half of one core from a cold cache, seconds from a warm one) and make
# compat (half a minute) run beside pytest, their output kept until it ends: one after the other,
# they left a core idle for two minutes. Every check still runs, and any failure fails make test.
LOGS := .cache/make-test

test: install browser js-sdk
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/python -m compileall -q approvals graphs web storage bench tests >/dev/null
	@mkdir -p $(LOGS)
	@status=0; \
	$(BIN)/mypy > $(LOGS)/mypy.log 2>&1 & mypy=$$!; \
	$(COMPAT) > $(LOGS)/compat.log 2>&1 & compat=$$!; \
	trap 'kill $$mypy $$compat 2>/dev/null' INT TERM; \
	echo "$(PYTEST) -n $(PYTEST_WORKERS) (mypy and make compat beside it)"; \
	$(PYTEST) -n $(PYTEST_WORKERS) $(PYTEST_PLUGINS) || status=1; \
	wait $$mypy || status=1; echo "--- mypy"; cat $(LOGS)/mypy.log; \
	wait $$compat || status=1; echo "--- make compat"; cat $(LOGS)/compat.log; \
	exit $$status

# The property tests on Hypothesis' "deep" profile (tests/conftest.py): 1,000 examples each where
# make test runs 100. The API fuzzing (tests/web/test_schemathesis.py) is left out: its run is
# fixed and deterministic, so a deeper profile would send it the same requests again.
test-deep: install
	HYPOTHESIS_PROFILE=deep $(PYTEST) -n $(PYTEST_WORKERS) $(PYTEST_PLUGINS) -m hypothesis \
		--ignore=tests/web/test_schemathesis.py --timeout=1800

# langchain's HumanInTheLoopMiddleware tests and langgraph-prebuilt's ToolNode tests, from the
# sdists of the installed versions (fetched from the package index once, into .cache/compat/ or
# APPROVALS_COMPAT_CACHE), run as shipped and with our class swapped in; tests/compat/
# known_failures.toml lists what ours may fail, each with its reason (docs/compat.md).
COMPAT = $(BIN)/python -m tests.compat.run_suites

compat: install
	$(COMPAT)

fmt: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The schema snapshot (storage/sql/schema.sql) that tests/integration/test_schema.py compares the
# migrations with; uses APPROVALS_TEST_DATABASE_URL like the tests (unset: the embedded server).
schema: install
	$(BIN)/python -m storage.schema

demo: install
	$(BIN)/approvals demo

# The benches time DBOS beside us: the bench extra installs it (dev includes it too; this
# stamp keeps `make bench` right should dev ever stop doing so).
BENCH_STAMP := $(VENV)/.bench-$(firstword $(shell cksum pyproject.toml))

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --disable-pip-version-check -q -e '.[dev,bench]'
	@rm -f $(VENV)/.bench-*
	@touch $@

# --count: the statements and server commits of each variant's cycle, in the report (and in
# --json's counts_per_cycle); tests/integration/test_statement_count.py holds the engine's to
# a budget.
bench: $(BENCH_STAMP)
	$(BIN)/python bench/approval_cycle.py --count 20
	$(BIN)/python bench/governance_overhead.py

soak: install
	$(BIN)/python bench/soak.py
