"""FastAPI and psycopg under OpenTelemetry, where the ``otel`` extra is installed and a tracer
provider is configured (``approvals.tracing.enabled``): each HTTP request is a span (the
decision's span, in the run's trace, links to it), and each statement is a span inside it.

Nothing is instrumented otherwise, so a process that traces nothing pays nothing per request or
statement. The probes and metrics are left out: an orchestrator polls them every few seconds.
"""

from __future__ import annotations

import functools
import importlib.util

from fastapi import FastAPI

from approvals.tracing import enabled

#: Paths no span is made for.
EXCLUDED_URLS = "/healthz,/readyz,/metrics"


def instrument(app: FastAPI) -> bool:
    """Instrument ``app`` and psycopg when tracing is on; whether it was."""
    if not enabled() or importlib.util.find_spec("opentelemetry.instrumentation.fastapi") is None:
        return False
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(app, excluded_urls=EXCLUDED_URLS)
    _instrument_psycopg()
    return True


@functools.cache
def _instrument_psycopg() -> None:
    """Once per process: every psycopg connection opened from here on."""
    if importlib.util.find_spec("opentelemetry.instrumentation.psycopg") is None:
        return
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

    PsycopgInstrumentor().instrument(enable_commenter=False)
