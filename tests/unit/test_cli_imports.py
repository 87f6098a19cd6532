"""The ``approvals`` command starts without importing what only some commands use: the engine
(psycopg, the settings' pydantic, the notifier's httpx) is imported when a command opens it, and
the policy engine (cel, which imports prompt_toolkit) when a policy command runs. Each of them
costs a share of every start, and the suite starts ``approvals`` as a process dozens of times."""

from __future__ import annotations

import json
import subprocess
import sys

#: Imported by a command that needs them, never by the CLI's modules themselves.
DEFERRED = ("web.engine", "web.settings", "approvals.policy", "cel", "httpx", "psycopg")


def test_importing_the_cli_imports_neither_the_engine_nor_the_policy_engine() -> None:
    # A fresh interpreter: this one has imported the engine long since.
    probe = (
        "import json, sys, web.cli; "
        f"print(json.dumps([m for m in {list(DEFERRED)!r} if m in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(done.stdout) == []
