"""OpenTelemetry spans of a run's life (the ``otel`` extra): one trace per run, across its
pauses and the processes that serve it.

A run that pauses for hours is started in one process, decided in another (a web request),
and resumed in a worker: no context is carried between them. So the run's trace is derived
from its id, which every process knows: the trace id is the run id (a UUID is 128 bits, a
trace id too) and the run's spans hang under one remote parent whose span id is derived from
it. Start, each interception point that decides something, the pause, the decision, the
claim, the resume and the tool's execution are spans of that trace, in whichever process
they happen. A span made inside another trace (the HTTP request that decided, say) links to
it.

Attributes name the run, thread, graph, request, call, tool, point, verdict and the
approver's principal id, never a call's arguments or a tool's result (what redaction hides
from approvers is not sent to a tracing backend either).

Without ``opentelemetry-api``, or with no tracer provider configured (the API's default),
every function here does nothing and costs a check.
"""

from __future__ import annotations

import enum
import hashlib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

try:
    from opentelemetry import trace
except ImportError:  # the otel extra is not installed
    trace = None  # type: ignore[assignment]

TRACER_NAME = "approvals"

#: The provider the spans go to instead of the global one (tests, or an application that
#: keeps the engine's spans apart); ``None``: the global provider.
_provider: Any = None


def use_provider(provider: Any) -> None:
    """Send the engine's spans to ``provider`` (an SDK ``TracerProvider``), or back to the
    global provider with ``None``."""
    global _provider
    _provider = provider


def _tracer() -> Any:
    """The tracer, or ``None`` when no provider records anything."""
    if trace is None:
        return None
    provider = _provider if _provider is not None else trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider.get_tracer(TRACER_NAME)


def enabled() -> bool:
    """Whether spans are recorded (a tracer provider is configured)."""
    return _tracer() is not None


def trace_id_of(run_id: str) -> int:
    """The trace id of a run: its id as a 128-bit number (a run id that is no UUID, hashed)."""
    try:
        return uuid.UUID(run_id).int
    except ValueError:
        return uuid.uuid5(uuid.NAMESPACE_URL, f"approvals-run:{run_id}").int


def _run_parent(run_id: str) -> Any:
    """The context whose current span is the run's remote parent span."""
    digest = hashlib.sha256(f"approvals-run-span:{run_id}".encode()).digest()
    parent = trace.SpanContext(
        trace_id=trace_id_of(run_id),
        span_id=int.from_bytes(digest[:8], "big") or 1,
        is_remote=True,
        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(trace.NonRecordingSpan(parent))


@contextmanager
def run_span(name: str, run_id: str, **attributes: Any) -> Iterator[Any]:
    """A span of ``run_id``'s trace for the block: a child of the current span when that is
    of the run's trace already, else of the run's parent (with a link to the current span of
    another trace). Yields the span (``None`` when nothing is recorded)."""
    tracer = _tracer()
    if tracer is None:
        yield None
        return
    current = trace.get_current_span().get_span_context()
    inside = current.is_valid and current.trace_id == trace_id_of(run_id)
    links = [trace.Link(current)] if current.is_valid and not inside else []
    with tracer.start_as_current_span(
        name,
        context=None if inside else _run_parent(run_id),
        links=links,
        attributes={"approvals.run_id": run_id, **_plain(attributes)},
    ) as span:
        yield span


def annotate(span: Any, **attributes: Any) -> None:
    """Add ``attributes`` to ``span`` (one ``run_span`` yielded; ``None``: nothing)."""
    if span is not None:
        span.set_attributes(_plain(attributes))


def _plain(attributes: dict[str, Any]) -> dict[str, str | int | float | bool]:
    """Attributes as OpenTelemetry takes them: ``approvals.``-named scalars, ``None`` left
    out, anything else as its text."""
    kept: dict[str, str | int | float | bool] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        name = key if "." in key else f"approvals.{key}"
        if isinstance(value, enum.Enum):
            value = value.value
        kept[name] = value if isinstance(value, str | int | float | bool) else str(value)
    return kept
