"""``approvals runs``: start a run (optionally streaming its updates), show one, cancel one,
retry one's failed resumes.

Exit codes follow the CLI's: 1 the run failed, 2 invalid input (a malformed run id or input),
3 the run already ended (or has nothing to retry), 4 no such run or graph.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from approvals.model import RunStatus
from web.cli.command import (
    EXIT_FAILURE,
    EXIT_INVALID,
    acting,
    emit_json,
    fail,
    parse_json,
    run_async,
)

if TYPE_CHECKING:
    from web.engine import Engine

runs_app = typer.Typer(no_args_is_help=True, help="Start and inspect runs.")

MAX_REASON = 2000


# Registered first, so that `approvals runs --help` lists cancel, retry, start, show.
@runs_app.command("cancel")
def runs_cancel(
    run_id: Annotated[str, typer.Argument(help="The run to cancel.")],
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (kept in the audit log).")
    ] = None,
    principal: Annotated[
        str | None, typer.Option("--as", help="Who cancels it (default cli:$USER).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Cancel a run that is running or waiting: its pending requests can no longer be decided,
    its queued resumes are skipped, and it never resumes. Exit 3: it already ended; 4: no such
    run."""
    if reason is not None and len(reason) > MAX_REASON:
        fail(f"--reason is longer than {MAX_REASON} characters", EXIT_INVALID)

    async def main(engine: Engine) -> dict[str, Any]:
        cancelled = await engine.cancel_run(
            run_id, by=await acting(engine, principal), reason=reason
        )
        return cancelled.to_json()

    result = run_async(main)
    if as_json:
        emit_json(result)
        return
    typer.echo(
        f"run {result['run_id']} cancelled ({result['requests_cancelled']} pending request(s)"
        f" cancelled, {result['jobs_skipped']} queued resume(s) skipped)"
    )


@runs_app.command("retry")
def runs_retry(
    run_id: Annotated[str, typer.Argument(help="The waiting run whose failed resumes to retry.")],
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (kept in the audit log).")
    ] = None,
    principal: Annotated[
        str | None, typer.Option("--as", help="Who retries (default cli:$USER).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Queue again the failed resume jobs of a waiting run, once what failed them is fixed; the
    ledger still runs each call at most once. Exit 3: the run is not waiting, or none of its
    resumes failed; 4: no such run."""
    if reason is not None and len(reason) > MAX_REASON:
        fail(f"--reason is longer than {MAX_REASON} characters", EXIT_INVALID)

    async def main(engine: Engine) -> dict[str, Any]:
        retried = await engine.retry_run(run_id, by=await acting(engine, principal), reason=reason)
        return retried.to_json()

    result = run_async(main)
    if as_json:
        emit_json(result)
        return
    typer.echo(
        f"run {result['run_id']} retried ({result['jobs_requeued']} failed resume(s) queued again)"
    )


@runs_app.command("start")
def runs_start(
    graph: Annotated[str, typer.Argument(help="Registered graph name, e.g. refund or email.")],
    input: Annotated[str, typer.Option("--input", help='Run input, e.g. {"message": "..."}.')],
    thread_id: Annotated[str | None, typer.Option("--thread-id", help="Thread to run on.")] = None,
    principal: Annotated[
        str | None, typer.Option("--as", help="Who starts the run (default cli:$USER).")
    ] = None,
    stream: Annotated[
        bool,
        typer.Option("--stream", help="Print each node's update as it happens, then the status."),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="With --stream: one JSON object a line.")
    ] = False,
) -> None:
    """Start a run; prints {run_id, status, pending} when it finishes or pauses."""
    payload = parse_json("--input", input)

    async def observe(node: str, data: dict[str, Any]) -> None:
        # The same events as GET /api/v1/runs/{id}/events sends (web.faces.run_stream).
        event = {"kind": "update", "node": node, **data}
        if as_json:
            typer.echo(json.dumps(event, sort_keys=True, separators=(",", ":")))
            return
        for message in data.get("messages", []):
            calls = ", ".join(message["tool_calls"])
            text = message["content"] + (f" [calls {calls}]" if calls else "")
            typer.echo(f"{node}: {text}" if text else f"{node}")
        if not data.get("messages"):
            typer.echo(node)

    async def main(engine: Engine) -> dict[str, Any]:
        outcome = await engine.start_run(
            graph,
            payload,
            principal=await acting(engine, principal),
            thread_id=thread_id,
            observe=observe if stream else None,
        )
        return outcome.to_json()

    result = run_async(main)
    if not stream:
        emit_json(result)
    elif as_json:
        typer.echo(json.dumps({"kind": "status", **result}, sort_keys=True, separators=(",", ":")))
    else:
        pending = f" (pending: {', '.join(result['pending'])})" if result["pending"] else ""
        typer.echo(f"run {result['run_id']}: {result['status']}{pending}")
        for key in ("answer", "error"):
            if result[key]:
                typer.echo(f"  {key}: {result[key]}")
    if result["status"] == RunStatus.FAILED:
        raise typer.Exit(EXIT_FAILURE)


@runs_app.command("show")
def runs_show(
    run_id: str,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show a run: its status, pending requests and tool executions (and, where its resume
    waits for a worker that serves its graph, that no live worker does)."""

    async def main(engine: Engine) -> dict[str, Any]:
        # Imported here, not at the top: the engine's modules are imported by run_async.
        from web.engine.workers import report_waits_for_worker

        report = await engine.report(run_id)
        waiting = await report_waits_for_worker(engine.adapters.db, report)
        return {**report, "waiting_for_worker": waiting}

    report = run_async(main)
    if as_json:
        emit_json(report)
        return
    typer.echo(f"run {report['run_id']} ({report['graph']}): {report['status']}")
    if report["waiting_for_worker"]:
        typer.echo(f"  waiting for a worker that serves {report['graph']!r}: no live worker does")
    if report["answer"]:
        typer.echo(f"  answer: {report['answer']}")
    if report["error"]:
        typer.echo(f"  error: {report['error']}")
    for r in report["requests"]:
        typer.echo(f"  request {r['id']}  {r['tool']}  {r['call_id']}  {r['status']}")
    for e in report["tool_executions"]:
        typer.echo(f"  tool    {e['tool']}  {e['call_id']}  {e['status']}")
    for i in report["interceptions"]:
        by = f" by {i['interceptor']}" if i["interceptor"] else ""
        via = f" via {i['resolved_by']}" if i["resolved_by"] else ""
        mode = "" if i["mode"] == "enforce" else f" [{i['mode']}]"
        typer.echo(
            f"  #{i['sequence']:<4} {i['point']:<16} {i['decision']}"
            f"{' ' + i['reason'] if i['reason'] else ''}{by}{via}{mode}"
        )
