"""Operations: what ``/metrics`` and ``/readyz`` read, cancelling a run, retention.

Metrics are computed from the engine's tables on each scrape (a few aggregates), so every
process reports the same numbers and nothing is lost when one restarts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from approvals.errors import InvalidValue, NothingToRetry, RunEnded, RunNotFound
from approvals.json_values import check_inputs
from approvals.model import DecisionKind, ExecutionStatus, JobStatus, RequestStatus, RunStatus
from storage.db import Connection, Database, json

if TYPE_CHECKING:
    from storage.migrate import SchemaState

#: Bucket bounds (seconds) of the decision-latency histogram: humans take minutes to days.
DECISION_BOUNDS: tuple[float, ...] = (
    5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 8 * 3600, 24 * 3600, 3 * 24 * 3600
)  # fmt: skip
#: Bucket bounds (seconds) of the resume-latency histogram: decided -> resumed step finished.
RESUME_BOUNDS: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
#: Threads pruned per transaction (each holds one advisory lock per thread until it commits).
PRUNE_BATCH = 200
#: Runs pruned per transaction, about (a thread's runs go together, so one long thread may
#: exceed it alone): bounds the rows one transaction deletes and how long it holds its locks.
PRUNE_BATCH_RUNS = 1000
#: Expired web sessions deleted per transaction.
PRUNE_BATCH_SESSIONS = 1000
#: The longest age retention takes: a century. Beyond some thousands of years ``now()`` minus
#: the age is before the first timestamp PostgreSQL knows, and no run is that old anyway.
MAX_RETENTION_AGE = timedelta(days=36500)
#: The engine's tables retention deletes a long-finished run's rows from, as ``prune_threads``
#: counts them. ``audit_events`` is not among them: the decision log stays whole.
RECORD_TABLES: tuple[str, ...] = (
    "runs",
    "approval_requests",
    "approval_votes",
    "decisions",
    "resume_queue",
    "tool_executions",
    "interception_records",
    "run_events",
    "run_notification_deliveries",
    "notification_deliveries",
    "notification_attempts",
    "openai_run_states",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Histogram:
    """A Prometheus histogram: cumulative counts per upper bound, their total and sum."""

    bounds: tuple[float, ...]
    cumulative: tuple[int, ...]
    count: int
    sum: float

    @classmethod
    def from_buckets(cls, bounds: Sequence[float], rows: Sequence[dict[str, Any]]) -> Histogram:
        """From rows of (bucket index, n, total): index ``i`` holds values within
        ``bounds[i]`` and above the bound before; ``len(bounds)`` those above every bound."""
        per_bucket = [0] * (len(bounds) + 1)
        total = 0.0
        for row in rows:
            per_bucket[min(int(row["bucket"]), len(bounds))] += int(row["n"])
            total += float(row["total"] or 0)
        cumulative, running = [], 0
        for n in per_bucket[:-1]:
            running += n
            cumulative.append(running)
        return cls(
            bounds=tuple(bounds),
            cumulative=tuple(cumulative),
            count=sum(per_bucket),
            sum=total,
        )


def _by_label(statuses: Sequence[str], counted: dict[str, float]) -> dict[str, int]:
    """Every known label (zero when absent), then any the database has that we do not know."""
    return {s: 0 for s in statuses} | {k: int(v) for k, v in counted.items()}


@dataclass(frozen=True, kw_only=True, slots=True)
class MetricsSnapshot:
    """The engine's state as /metrics reports it, read at one moment."""

    runs: dict[str, int]
    requests: dict[str, int]
    decisions: dict[str, int]
    jobs: dict[str, int]
    executions: dict[str, int]
    oldest_pending_seconds: float
    #: Failed resume jobs whose run still waits: an operator's to retry (or to cancel the run).
    stranded_jobs: int
    decision_latency: Histogram
    resume_latency: Histogram

    @property
    def pending(self) -> int:
        return self.requests.get(RequestStatus.PENDING, 0)

    @property
    def queued(self) -> int:
        return self.jobs.get(JobStatus.QUEUED, 0)


@dataclass(frozen=True, kw_only=True, slots=True)
class Cancellation:
    """A cancelled run: how many pending requests it closed and queued resumes it skipped."""

    run_id: str
    requests: int
    jobs: int

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": RunStatus.CANCELLED.value,
            "requests_cancelled": self.requests,
            "jobs_skipped": self.jobs,
        }


@dataclass(frozen=True, slots=True)
class Retry:
    """A waiting run whose failed resume jobs were queued again: how many."""

    run_id: str
    jobs: int

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": RunStatus.WAITING.value,
            "jobs_requeued": self.jobs,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Pruned:
    """What a retention pass deleted (or, in a dry run, would delete)."""

    #: Threads something was deleted of (checkpoints, records or both).
    threads: int = 0
    checkpoints: int = 0
    writes: int = 0
    blobs: int = 0
    #: Rows deleted per engine table (``RECORD_TABLES``); empty with ``checkpoints_only``.
    records: Mapping[str, int] = field(default_factory=dict)
    #: Expired web sessions deleted.
    sessions: int = 0
    dry_run: bool = False
    checkpoints_only: bool = False
    #: Threads left for a later pass because a step held them.
    busy: int = 0
    #: Threads whose checkpoints went but whose records stay for a later pass: something of
    #: theirs is still in flight (a request pending, a resume queued, a notification sending).
    held: int = 0

    def __add__(self, other: Pruned) -> Pruned:
        return Pruned(
            threads=self.threads + other.threads,
            checkpoints=self.checkpoints + other.checkpoints,
            writes=self.writes + other.writes,
            blobs=self.blobs + other.blobs,
            records={
                t: self.records.get(t, 0) + other.records.get(t, 0)
                for t in RECORD_TABLES
                if t in self.records or t in other.records
            },
            sessions=self.sessions + other.sessions,
            dry_run=self.dry_run,
            checkpoints_only=self.checkpoints_only,
            busy=self.busy + other.busy,
            held=self.held + other.held,
        )

    @property
    def runs(self) -> int:
        return self.records.get("runs", 0)

    @property
    def rows(self) -> int:
        """Every row deleted: checkpoints, records and sessions."""
        return (
            self.checkpoints + self.writes + self.blobs + sum(self.records.values()) + self.sessions
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "threads": self.threads,
            "runs": self.runs,
            "checkpoints": self.checkpoints,
            "checkpoint_writes": self.writes,
            "checkpoint_blobs": self.blobs,
            "records": {t: self.records.get(t, 0) for t in RECORD_TABLES},
            "web_sessions": self.sessions,
            "rows": self.rows,
            "busy_threads": self.busy,
            "held_threads": self.held,
            "checkpoints_only": self.checkpoints_only,
            "dry_run": self.dry_run,
        }


class PgOperations:
    """The queries behind metrics, readiness, ``runs cancel`` and ``retention prune``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def metrics(self) -> MetricsSnapshot:
        counts: dict[str, dict[str, float]] = {}
        oldest = 0.0
        for row in await self._db.all("ops_counts", {}):
            if row["family"] == "oldest_pending":
                oldest = float(row["value"] or 0)
            else:
                counts.setdefault(row["family"], {})[row["label"]] = row["value"]
        latencies = await self._db.all(
            "ops_latencies",
            {
                "decision_bounds": [float(b) for b in DECISION_BOUNDS],
                "resume_bounds": [float(b) for b in RESUME_BOUNDS],
            },
        )
        return MetricsSnapshot(
            runs=_by_label(list(RunStatus), counts.get("runs", {})),
            requests=_by_label(list(RequestStatus), counts.get("requests", {})),
            decisions=_by_label(list(DecisionKind), counts.get("decisions", {})),
            jobs=_by_label(list(JobStatus), counts.get("jobs", {})),
            executions=_by_label(list(ExecutionStatus), counts.get("executions", {})),
            oldest_pending_seconds=oldest,
            stranded_jobs=int(sum(counts.get("stranded_jobs", {}).values())),
            decision_latency=Histogram.from_buckets(
                DECISION_BOUNDS, [r for r in latencies if r["metric"] == "decision"]
            ),
            resume_latency=Histogram.from_buckets(
                RESUME_BOUNDS, [r for r in latencies if r["metric"] == "resume"]
            ),
        )

    async def schema(self) -> SchemaState:
        """The applied schema versions (raises ``DatabaseUnavailable`` when unreachable)."""
        # Imported here: Alembic and LangGraph's checkpointer take a while to import, and only
        # readiness needs them.
        from storage.migrate import SchemaState

        return SchemaState.from_row(await self._db.one("schema_versions", {}))

    async def cancel(self, run_id: str, *, principal: str, reason: str | None) -> Cancellation:
        """Cancel a run that has not ended; waits for a step in progress to settle first.

        Its pending requests become ``cancelled`` (no decision can consume them), its queued
        resume jobs ``skipped``; the audit log records who cancelled it and why. Raises
        ``RunNotFound``, ``RunEnded`` or ``InvalidValue`` (a reason PostgreSQL cannot store)."""
        check_inputs(reason=reason, principal=principal)
        error = f"cancelled by {principal}" + (f": {reason}" if reason else "")
        async with self._db.transaction() as conn:
            found = await self._db.one("lock_run_thread", {"run_id": run_id}, conn)
            if found is None:
                raise RunNotFound(run_id)
            row = await self._db.one(
                "cancel_run",
                {"run_id": run_id, "principal": principal, "reason": reason, "error": error},
                conn,
            )
        if row is None:
            # Read after the commit: the status that made the run not cancellable.
            status = await self._db.one("get_run", {"id": run_id})
            raise RunEnded(run_id, status["status"] if status else "unknown")
        return Cancellation(run_id=run_id, requests=int(row["requests"]), jobs=int(row["jobs"]))

    async def retry(self, run_id: str, *, principal: str, reason: str | None) -> Retry:
        """Queue again the failed resume jobs of a run that waits (``retry_failed_jobs``),
        under its thread's lock: after a failure that is gone (a defect fixed, a tool's
        service back), the decided calls resume; the ledger still runs each at most once.

        Raises ``RunNotFound``, ``NothingToRetry`` (the run is not waiting, or none of its
        resumes failed; nothing changed) or ``InvalidValue`` (a reason or principal
        PostgreSQL cannot store)."""
        check_inputs(reason=reason, principal=principal)
        async with self._db.transaction() as conn:
            found = await self._db.one("lock_run_thread", {"run_id": run_id}, conn)
            if found is None:
                raise RunNotFound(run_id)
            row = await self._db.one(
                "retry_failed_jobs",
                {"run_id": run_id, "principal": principal, "reason": reason},
                conn,
            )
            assert row is not None  # the run exists, and its lock keeps it
            if not row["jobs"]:
                raise NothingToRetry(run_id, str(row["status"]))
        return Retry(run_id=run_id, jobs=int(row["jobs"]))

    async def prune(
        self,
        older_than: timedelta,
        *,
        principal: str,
        dry_run: bool = False,
        checkpoints_only: bool = False,
        batch: int = PRUNE_BATCH,
        batch_runs: int = PRUNE_BATCH_RUNS,
    ) -> Pruned:
        """Delete what threads whose runs all ended more than ``older_than`` ago still hold:
        LangGraph's checkpoints, and (unless ``checkpoints_only``) the engine's own rows of
        those runs (``RECORD_TABLES``), then expired web sessions. The audit log stays whole
        and verifiable; it is what remains of a pruned run. A thread with a run still running
        or waiting is never touched; one with something still in flight keeps its records
        until a later pass (``held``).

        Works in transactions of at most ``batch`` threads and about ``batch_runs`` runs,
        each holding those threads' locks until it commits, so no lock is held for long and a
        thread a step holds is left for later (``busy``).

        ``InvalidValue`` unless ``older_than`` is more than zero (zero or less would take runs
        that ended a moment ago) and at most ``MAX_RETENTION_AGE``, or when ``principal`` is
        text the audit log cannot store: checked before anything is deleted, since the audit
        event of the prune is written last."""
        check_inputs(principal=principal)
        if not timedelta(0) < older_than <= MAX_RETENTION_AGE:
            raise InvalidValue(
                "older_than",
                f"must be more than zero and at most {MAX_RETENTION_AGE.days} days"
                f" (got {older_than})",
            )
        params: dict[str, Any] = {"older_than": older_than, "checkpoints_only": checkpoints_only}
        if dry_run:
            row = await self._db.one("count_prunable", params)
            assert row is not None
            return _pruned(row, checkpoints_only=checkpoints_only, dry_run=True) + Pruned(
                sessions=int(row["web_sessions"])
            )
        age = int(older_than.total_seconds())
        total, batches = await self._prune_threads(
            params, principal=principal, age=age, batch=batch, batch_runs=batch_runs
        )
        sessions = Pruned() if checkpoints_only else await self._prune_sessions()
        if sessions.sessions or not batches:
            # Expired sessions (no run's record), or a pass that found nothing: said once.
            await self._record_prune(
                principal,
                {"older_than_seconds": age, "batch": None},
                sessions + Pruned(busy=total.busy, checkpoints_only=checkpoints_only),
            )
        return total + sessions

    async def _prune_threads(
        self, params: dict[str, Any], *, principal: str, age: int, batch: int, batch_runs: int
    ) -> tuple[Pruned, int]:
        """``prune``'s passes over the prunable threads, a transaction per batch; what they
        deleted, and how many batches deleted something."""
        checkpoints_only = params["checkpoints_only"]
        total, after, batches = Pruned(checkpoints_only=checkpoints_only), "", 0
        while True:
            async with self._db.transaction() as conn:
                candidates = await self._db.all(
                    "prunable_threads",
                    params | {"after": after, "limit": batch, "max_runs": batch_runs},
                    conn,
                )
                if not candidates:
                    return total, batches
                after = candidates[-1]["thread_id"]
                locked = [c["thread_id"] for c in candidates if c["locked"]]
                total += Pruned(busy=len(candidates) - len(locked))
                if locked:
                    row = await self._db.one("prune_threads", params | {"threads": locked}, conn)
                    assert row is not None
                    deleted = _pruned(row, checkpoints_only=checkpoints_only)
                    total += deleted
                    batches += 1
                    # In the batch's own transaction, last (the audit chain's lock is held only
                    # until this commits): a pass that dies between batches leaves an event
                    # for every batch it deleted, never a deletion the log does not tell of.
                    await self._record_prune(
                        principal, {"older_than_seconds": age, "batch": batches}, deleted, conn
                    )

    async def _prune_sessions(self) -> Pruned:
        """``prune``'s deletion of expired web sessions, ``PRUNE_BATCH_SESSIONS`` at a time."""
        sessions = Pruned()
        while True:
            row = await self._db.one("prune_web_sessions", {"limit": PRUNE_BATCH_SESSIONS})
            assert row is not None
            sessions += Pruned(sessions=int(row["web_sessions"]))
            if int(row["web_sessions"]) < PRUNE_BATCH_SESSIONS:
                return sessions

    async def _record_prune(
        self,
        principal: str,
        head: dict[str, Any],
        deleted: Pruned,
        conn: Connection | None = None,
    ) -> None:
        await self._db.run(
            "record_prune", {"principal": principal, "data": json(head | deleted.to_json())}, conn
        )

    async def was_pruned(self, run_id: str) -> bool:
        """Whether a run that has no row any more was pruned: the decision log knows it."""
        row = await self._db.one("run_was_pruned", {"run_id": run_id})
        return bool(row and row["pruned"])


def _pruned(row: dict[str, Any], *, checkpoints_only: bool, dry_run: bool = False) -> Pruned:
    return Pruned(
        threads=int(row["threads"]),
        checkpoints=int(row["checkpoints"]),
        writes=int(row["writes"]),
        blobs=int(row["blobs"]),
        records={} if checkpoints_only else {t: int(row[t]) for t in RECORD_TABLES},
        dry_run=dry_run,
        checkpoints_only=checkpoints_only,
        held=int(row["held"]),
    )
