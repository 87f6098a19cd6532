"""One trace per run, across the pause: a refund started, paused, decided and resumed by the
worker is one OpenTelemetry trace (the SDK's in-memory exporter) from its start through the
pause and the decision to the tool's execution; no span carries the call's arguments."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from approvals.tracing import use_provider
from tests.integration.helpers import start_refund
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture
def exported() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    use_provider(provider)
    try:
        yield provider, exporter
    finally:
        use_provider(None)
        provider.shutdown()


def of_run(spans: tuple[ReadableSpan, ...], run_id: str) -> list[ReadableSpan]:
    return [s for s in spans if (s.attributes or {}).get("approvals.run_id") == run_id]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_paused_and_resumed_refund_is_one_trace_from_start_to_the_tool(
    engine: Engine, exported: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = exported
    run = await start_refund(engine)
    # The decision is made inside another trace (an HTTP request's, say): its span is of the
    # run's trace, and links to that one.
    with provider.get_tracer("test").start_as_current_span("POST decision") as outer:
        await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    assert await engine.drain() == 1

    spans = of_run(exporter.get_finished_spans(), run.run_id)
    names = [s.name for s in spans]
    for expected in (
        "approvals.run.start",
        "approvals.intercept",
        "approvals.pause",
        "approvals.decide",
        "approvals.claim",
        "approvals.resume",
        "approvals.tool",
    ):
        assert expected in names, names
    # One trace: its id is the run's.
    trace_id = uuid.UUID(run.run_id).int
    assert {s.context.trace_id for s in spans if s.context is not None} == {trace_id}

    by_name = {s.name: s for s in spans}
    pause = by_name["approvals.pause"]
    assert attrs(pause)["approvals.tool"] == "issue_refund"
    assert attrs(pause)["approvals.request_id"] == run.pending[0]
    decide = by_name["approvals.decide"]
    assert attrs(decide)["approvals.approver"] == "bob"
    assert attrs(decide)["approvals.decision"] == "approve"
    assert [link.context.span_id for link in decide.links] == [outer.get_span_context().span_id]
    tool = by_name["approvals.tool"]
    assert attrs(tool)["approvals.tool"] == "issue_refund"
    # The resume is inside the claim, and the tool's execution inside the resume.
    claim, resume = by_name["approvals.claim"], by_name["approvals.resume"]
    assert resume.parent is not None
    assert claim.context is not None
    assert resume.parent.span_id == claim.context.span_id
    assert tool.start_time is not None
    assert resume.start_time is not None
    assert resume.end_time is not None
    assert resume.start_time <= tool.start_time <= resume.end_time
    # The refund's pre_tool_call: denied (liftably) when it paused, allowed once approved.
    verdicts = [
        (attrs(s).get("approvals.verdict"), attrs(s).get("approvals.reason"))
        for s in spans
        if s.name == "approvals.intercept"
        and attrs(s).get("approvals.point") == "pre_tool_call"
        and attrs(s).get("approvals.tool") == "issue_refund"
    ]
    assert verdicts[0][0] == "deny"
    assert verdicts[-1] == ("allow", "approved_by_approver")
    # No argument of the call in any attribute (the refund's amount and reason).
    flat = repr([attrs(s) for s in spans])
    assert "25.0" not in flat
    assert "customer request" not in flat


async def test_nothing_is_recorded_without_a_provider(engine: Engine) -> None:
    from approvals.tracing import enabled, run_span

    assert not enabled()
    with run_span("approvals.run.start", str(uuid.uuid4())) as span:
        assert span is None
    run = await start_refund(engine)
    assert run.status == "waiting"


async def test_langchain_runs_carry_the_engines_run_and_request(engine: Engine) -> None:
    """LangSmith (any LangChain tracer) sees which engine run, thread, graph and request a
    LangChain run belongs to, before and after the pause."""
    from langchain_core.tracers.context import collect_runs

    with collect_runs() as started:
        run = await start_refund(engine)
    metadata = [r.extra.get("metadata", {}) for r in started.traced_runs]
    assert metadata
    assert {m.get("approvals_run_id") for m in metadata} == {run.run_id}
    assert {m.get("approvals_graph") for m in metadata} == {"refund"}
    assert all("approvals_request_id" not in m for m in metadata)

    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    with collect_runs() as resumed:
        assert await engine.drain() == 1
    metadata = [r.extra.get("metadata", {}) for r in resumed.traced_runs]
    assert metadata
    assert {m.get("approvals_request_id") for m in metadata} == {run.pending[0]}
    assert {m.get("approvals_thread_id") for m in metadata} == {run.thread_id}
