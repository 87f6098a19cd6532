"""The application layer: one method per use case, and the composition root that wires them.

Every face (the JSON API, the pages, the CLI, the web app's worker) does what it does through
an ``Engine``: it translates its input to a call here and the result (or the error's category)
back. The faces import ``Engine``, and every name they need, from this package; they reach
storage and the agent host only through it (the import contract in pyproject.toml).

One module per concept:

- ``root``: the composition root, ``open_engine`` (the pool and every adapter, built once),
  and ``upgrade`` and ``freeze_heap`` for the processes around it;
- ``engine``: ``Engine``, thin: it holds the adapters and delegates each use case to its
  family's module;
- ``adapters``: what the engine holds (``Adapters``, frozen, built once) and the event hubs
  (each one LISTEN connection, made on first use);
- ``agents``: the LangGraph side (saver, registry, runner, worker), built on first use:
  importing LangGraph takes seconds, and most CLI commands never need it;
- ``decide``: deciding a pending call; the approver rules are applied there, for every caller;
- ``edits``: an approver's edit, checked against the run's policy;
- ``runs``: starting, cancelling, retrying, reporting on and pruning runs, and the worker's loop;
- ``reads``: what the faces show (the requests and runs a principal may see, the listings'
  pages, the counts).
"""

from __future__ import annotations

from storage.audit import AuditFilter, Verification
from storage.embedded import start_embedded
from storage.ops import Cancellation, Histogram, MetricsSnapshot
from storage.request_events import RequestEvent, RequestEventKind, RequestFeed
from storage.roles import Grant, grant_runtime
from storage.run_events import PgRunEvents, Subscription
from web.engine.engine import Engine
from web.engine.reads import valid_run_id
from web.engine.root import freeze_heap, open_engine, upgrade

#: The engine and its composition root, and the storage types the faces name (in signatures
#: and isinstance checks) and the database's administration (the embedded server, the runtime
#: role's grants), re-exported so that the faces reach storage only through the engine.
__all__ = [
    "AuditFilter",
    "Cancellation",
    "Engine",
    "Grant",
    "Histogram",
    "MetricsSnapshot",
    "PgRunEvents",
    "RequestEvent",
    "RequestEventKind",
    "RequestFeed",
    "Subscription",
    "Verification",
    "freeze_heap",
    "grant_runtime",
    "open_engine",
    "start_embedded",
    "upgrade",
    "valid_run_id",
]
