"""The states of the engine's records.

``StrEnum`` so that they compare equal to the strings stored in PostgreSQL. The records
themselves (``approvals.model``) are made of them, and so is the table of decision kinds
(``approvals.decision_kinds``: the status each kind leaves a request in).
"""

from __future__ import annotations

import enum


class RequestStatus(enum.StrEnum):
    """Where an approval request is in its life. Only ``pending`` can be decided."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    #: A human answered on the tool's behalf (a ``respond`` decision): the tool never ran.
    ANSWERED = "answered"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"
    #: Its run was cancelled while it waited: it can no longer be decided.
    CANCELLED = "cancelled"


class RunStatus(enum.StrEnum):
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    #: A policy denied the input, a model call or the final answer: the run stopped there.
    BLOCKED = "blocked"
    FAILED = "failed"
    #: An operator cancelled it (``approvals runs cancel``): final, it never resumes.
    CANCELLED = "cancelled"


class ExecutionStatus(enum.StrEnum):
    """Tool-execution ledger states. ``outcome_unknown`` is final: never retried blindly."""

    STARTED = "started"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    OUTCOME_UNKNOWN = "outcome_unknown"


class JobStatus(enum.StrEnum):
    QUEUED = "queued"
    DONE = "done"
    SKIPPED = "skipped"
    FAILED = "failed"
