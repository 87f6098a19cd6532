"""One complete in-memory adapter: every port of ``approvals.ports`` on a ``MemoryStore``.

For tests of graphs and policies that need no database, for the conformance harness, and for
benches that measure the governance layer without database round trips. Build every adapter of
one engine on the same store (each one built without a store gets a fresh one of its own).

The adapters pass the same port contract tests as the PostgreSQL ones (``tests/contracts``):
a request is consumed once, an execution begins once, a job is claimed once, quorum votes
count once per person. What they do not give is durability and sharing: the store lives in one
process, a crash forgets it, and nothing is written to the audit log. The engine itself runs
on the PostgreSQL adapters in ``storage``.

``MemorySideEffects`` is no engine port: it has the shape of the examples' side-effect log
(``graphs.examples.effects``), which the conformance harnesses give their graphs.
"""

from __future__ import annotations

from approvals.memory.accounts import MemoryAccounts
from approvals.memory.requests import MemoryApprovalRequests, MemoryDecisions, MemoryExpiry
from approvals.memory.runs import (
    MemoryClaimedJob,
    MemoryResumeChecks,
    MemoryResumeQueue,
    MemoryRunLease,
    MemoryRuns,
    MemorySideEffects,
    MemoryToolLedger,
)
from approvals.memory.store import MemoryStore

__all__ = [
    "MemoryAccounts",
    "MemoryApprovalRequests",
    "MemoryClaimedJob",
    "MemoryDecisions",
    "MemoryExpiry",
    "MemoryResumeChecks",
    "MemoryResumeQueue",
    "MemoryRunLease",
    "MemoryRuns",
    "MemorySideEffects",
    "MemoryStore",
    "MemoryToolLedger",
]
