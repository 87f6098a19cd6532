"""What monitoring scrapes from the app: ``/metrics``, ``/healthz`` and ``/readyz``.

None of them needs a session. ``/metrics`` reveals counts and timings, never ids or arguments,
but even those (every group's request and decision counts) are not for anyone who can reach the
app, and each scrape runs queries: so it is closed by default. Without ``APPROVALS_METRICS_TOKEN``
it answers 404 (metrics are off); with it, ``Authorization: Bearer <token>`` is required (401
otherwise). None of them is in the OpenAPI document: they are not the API.
"""

from __future__ import annotations

import hmac
import logging
import math
from collections.abc import Iterable, Mapping

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from approvals.errors import DatabaseUnavailable
from web.deps import EngineDep, settings_of
from web.engine import Histogram, MetricsSnapshot
from web.engine.readiness import schema_or_problem
from web.engine.workers import unserved_jobs
from web.errors import ApiError
from web.settings import Settings

log = logging.getLogger("approvals.web")

#: Prometheus text exposition format, version 0.0.4.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: A readiness probe answers within this, whatever the database does.
READY_TIMEOUT_SECONDS = 3.0


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class Exposition:
    """Builds a Prometheus text exposition, one metric family at a time."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def family(
        self,
        name: str,
        kind: str,
        help: str,
        samples: Iterable[tuple[Mapping[str, str], float]],
    ) -> None:
        self._lines += [f"# HELP {name} {help}", f"# TYPE {name} {kind}"]
        self._samples(name, samples)

    def _samples(self, name: str, samples: Iterable[tuple[Mapping[str, str], float]]) -> None:
        for labels, value in samples:
            shown = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
            series = f"{name}{{{shown}}}" if shown else name
            self._lines.append(f"{series} {_number(value)}")

    def gauge(self, name: str, help: str, value: float) -> None:
        self.family(name, "gauge", help, [({}, value)])

    def labelled(
        self, name: str, kind: str, help: str, label: str, values: Mapping[str, int]
    ) -> None:
        self.family(name, kind, help, [({label: k}, v) for k, v in sorted(values.items())])

    def histogram(self, name: str, help: str, histogram: Histogram) -> None:
        self._lines += [f"# HELP {name} {help}", f"# TYPE {name} histogram"]
        buckets = [
            ({"le": _number(bound)}, float(n))
            for bound, n in zip(histogram.bounds, histogram.cumulative, strict=True)
        ]
        buckets.append(({"le": "+Inf"}, float(histogram.count)))
        self._samples(f"{name}_bucket", buckets)
        self._samples(f"{name}_sum", [({}, histogram.sum)])
        self._samples(f"{name}_count", [({}, histogram.count)])

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"


def render(snapshot: MetricsSnapshot) -> str:
    """The snapshot in the Prometheus text format."""
    out = Exposition()
    out.gauge(
        "approvals_pending_requests",
        "Approval requests waiting for a decision.",
        snapshot.pending,
    )
    out.gauge(
        "approvals_oldest_pending_request_age_seconds",
        "How long the oldest pending request has waited (0 when none waits).",
        snapshot.oldest_pending_seconds,
    )
    out.labelled(
        "approvals_requests",
        "gauge",
        "Approval requests by status.",
        "status",
        snapshot.requests,
    )
    out.labelled(
        "approvals_decisions_total",
        "counter",
        "Decisions made, by kind (approve, edit, reject).",
        "kind",
        snapshot.decisions,
    )
    out.histogram(
        "approvals_decision_latency_seconds",
        "Time from a request being recorded to its decision.",
        snapshot.decision_latency,
    )
    out.gauge(
        "approvals_resume_queue_depth",
        "Resume jobs queued and not yet finished.",
        snapshot.queued,
    )
    out.labelled(
        "approvals_resume_jobs",
        "gauge",
        "Resume jobs by status (queued, done, skipped, failed).",
        "status",
        snapshot.jobs,
    )
    out.histogram(
        "approvals_resume_latency_seconds",
        "Time from a resume job being queued (the decision) to its resumed step finishing.",
        snapshot.resume_latency,
    )
    out.labelled("approvals_runs", "gauge", "Runs by status.", "status", snapshot.runs)
    out.labelled(
        "approvals_tool_executions",
        "gauge",
        "Tool executions by status (outcome_unknown needs an operator).",
        "status",
        snapshot.executions,
    )
    out.family(
        "approvals_failures",
        "gauge",
        "What needs an operator: failed runs, failed resume jobs of runs that still wait, tool"
        " calls of unknown outcome.",
        [
            ({"kind": "run_failed"}, snapshot.runs.get("failed", 0)),
            ({"kind": "job_failed"}, snapshot.stranded_jobs),
            ({"kind": "outcome_unknown"}, snapshot.executions.get("outcome_unknown", 0)),
        ],
    )
    return out.text()


def _check_token(request: Request, settings: Settings) -> None:
    """Refuses a scrape without the metrics token; with no token configured, metrics are off."""
    if settings.metrics_token is None:
        # Closed by default: an unset token must not mean "open to anyone who can reach us".
        raise ApiError(404, "not_found", "metrics are off: set APPROVALS_METRICS_TOKEN")
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    expected = settings.metrics_token.get_secret_value()
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.strip().encode(), expected.encode()
    ):
        raise ApiError(401, "unauthenticated", "/metrics needs the metrics bearer token")


#: Monitoring's endpoints: none needs a session, none is in the OpenAPI document.
router = APIRouter(include_in_schema=False)


@router.get("/healthz")
async def healthz() -> Response:
    """Liveness: the process answers. Never touches the database."""
    return JSONResponse({"status": "ok"})


@router.get("/readyz")
async def readyz(engine: EngineDep) -> Response:
    """Readiness: the database answers and its schema is the one this code needs."""
    schema, problem = await schema_or_problem(engine, READY_TIMEOUT_SECONDS)
    if schema is None or problem is not None:
        return _not_ready(problem or "the schema could not be read")
    return JSONResponse(
        {
            "status": "ready",
            "revision": schema.revision,
            "checkpoints": schema.checkpoints,
            # What this process serves: a rolling restart is done when every process agrees.
            "graphs": engine.agent_names(),
            "config_digest": engine.registry.config_digest(),
        }
    )


@router.get("/metrics")
async def metrics(request: Request, engine: EngineDep) -> Response:
    """Prometheus metrics, computed from the database on each scrape."""
    _check_token(request, settings_of(request))
    try:
        snapshot = await engine.operations.metrics()
        unserved = await unserved_jobs(engine.adapters.db)
    except DatabaseUnavailable as exc:
        log.warning("metrics scrape failed: %s", exc)
        return PlainTextResponse(f"{exc}\n", status_code=503)
    text = render(snapshot)
    more = Exposition()
    more.labelled(
        "approvals_resume_jobs_unserved",
        "gauge",
        "Queued resume jobs, by graph, that no live worker serves (they wait for one).",
        "graph",
        unserved,
    )
    return Response(text + more.text(), media_type=CONTENT_TYPE)


def _not_ready(reason: str) -> Response:
    log.warning("not ready: %s", reason)
    return JSONResponse({"status": "unavailable", "reason": reason}, status_code=503)
