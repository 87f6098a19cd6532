# Developer and CI entry points. Everything runs from the project venv in .venv.
#   make test   lint + type-check + import contracts + pytest
#               (APPROVALS_TEST_DATABASE_URL=postgresql://... to use an existing server,
#                unset to use the embedded one)
#   make demo   run the demo;  make bench   run the benchmarks;  make soak   kill processes, count
#   make fmt    auto-format

PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The install stamp is keyed to pyproject.toml's content: edit the dependencies and the next
# target that needs the venv re-runs pip; otherwise it costs nothing.
STAMP := $(VENV)/.install-$(firstword $(shell cksum pyproject.toml))

.DEFAULT_GOAL := test
.PHONY: venv install test lint fmt demo bench soak

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

test: lint
	$(BIN)/pytest

fmt: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

demo: install
	$(BIN)/approvals demo

bench: install
	$(BIN)/python bench/approval_cycle.py
	$(BIN)/python bench/governance_overhead.py

soak: install
	$(BIN)/python bench/soak.py
