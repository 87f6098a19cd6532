"""``approvals serve``, ``approvals worker`` and ``approvals demo``: the long-running commands.

Each runs until SIGTERM/SIGINT (``worker --drain`` and the demo stop on their own), and logs
to stderr (web.logs) so that what they print on stdout stays parseable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shlex
import signal
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from approvals.model import RunStatus
from web.cli.command import (
    database_url,
    guarded,
    load_settings,
    migration_url,
    run_async,
    run_loop,
    upgrade_schema,
)

if TYPE_CHECKING:
    from approvals.model import PendingCall
    from web.engine import Engine


def _log_to_stderr() -> None:
    """Log as the settings say, to stderr (web.logs), so that stdout stays parseable."""
    # Imported here, not at the top: web.logs imports the settings (pydantic, about 0.1 s),
    # which ``--help`` and the commands of other groups do not need.
    from web.logs import configure_logging

    guarded(lambda: configure_logging(load_settings()))


def _stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)


def worker_command(
    drain: Annotated[
        bool,
        typer.Option(
            "--drain", help="Expire what is past its deadline, resume what is queued, then exit."
        ),
    ] = False,
    concurrency: Annotated[int | None, typer.Option(min=1, max=64)] = None,
    health_port: Annotated[
        int | None,
        typer.Option(
            "--health-port",
            min=0,
            max=65535,
            help="Serve GET /healthz (liveness) and /readyz (readiness) on this port (0: any"
            " free one); the address is printed.",
        ),
    ] = None,
    health_host: Annotated[
        str, typer.Option("--health-host", help="Address the health probe listens on.")
    ] = "127.0.0.1",
) -> None:
    """Resume runs whose calls were decided, and expire (or escalate) requests past their
    deadline every APPROVALS_SWEEP_INTERVAL_SECONDS. Runs until SIGTERM/SIGINT unless --drain."""
    _log_to_stderr()

    async def main(engine: Engine) -> int:
        if drain:
            return await engine.drain()
        # Imported here, not at the top: there it would import the engine (about 0.5 s) for
        # every command; here run_async has imported it already.
        from web.engine import freeze_heap

        freeze_heap(engine)
        stop = asyncio.Event()
        _stop_on_signals(stop)
        if health_port is None:
            await engine.work(stop)
            return 0
        return await _work_with_probe(engine, stop, health_host, health_port)

    update = {"worker_concurrency": concurrency} if concurrency is not None else None
    done = run_async(main, settings_update=update)
    if drain:
        typer.echo(json.dumps({"resumed": done}))


async def _work_with_probe(engine: Engine, stop: asyncio.Event, host: str, port: int) -> int:
    """``engine.work(stop)`` with the health probe (``web.worker_probe``) served beside it."""
    # Imported here, not at the top: uvicorn and FastAPI (over a second, see serve) only for
    # a worker that serves its probe.
    from web.serving import bind, url_of
    from web.worker_probe import WorkerState, probe_serving

    state = WorkerState(
        graphs=tuple(engine.agent_names()), config_digest=engine.registry.config_digest()
    )
    sock = bind(host, port)
    async with probe_serving(engine, state, sock):
        typer.echo(f"health probe at {url_of(sock)}/healthz and /readyz", err=True)
        state.running = True
        try:
            await engine.work(stop)
        except BaseException as exc:
            state.stopped_because = f"{type(exc).__name__}: {exc}"
            raise
        state.stopped_because = "stopping"
    return 0


def serve_command(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="0: any free port.")] = 8000,
    with_worker: Annotated[
        bool, typer.Option("--with-worker", help="Also resume decided runs in this process.")
    ] = False,
) -> None:
    """Serve the approvers' web app (and the JSON API) until SIGTERM/SIGINT."""
    # Imported here, not at the top: the web app (FastAPI, uvicorn, templates) takes over a
    # second to import, and only serve and demo need it.
    from web.serving import bind, serve_forever, serving, url_of

    _log_to_stderr()

    async def serve() -> None:
        settings = load_settings()
        url, _ = database_url(settings)
        await upgrade_schema(migration_url(settings, url), runtime_role=settings.runtime_role)
        sock = bind(host, port)
        if "public_url" not in settings.model_fields_set:
            settings = settings.model_copy(update={"public_url": url_of(sock)})
            if host in ("0.0.0.0", "::", ""):  # noqa: S104 - checking for it, not binding
                # Forms are accepted from the public URL's origin only, never the Host header's.
                typer.echo(
                    f"warning: APPROVALS_PUBLIC_URL is not set, so the pages accept forms only"
                    f" from {settings.public_url}; set it to the address approvers open",
                    err=True,
                )
        stop = asyncio.Event()
        _stop_on_signals(stop)
        async with serving(
            settings, sock, database_url=url, with_worker=with_worker, freeze=True
        ) as server:
            typer.echo(f"serving {settings.public_url} (API docs at /api/docs)")
            await serve_forever(server, stop)

    guarded(lambda: run_loop(serve()))


def demo_command(
    message: Annotated[str, typer.Option(help="What to ask the refund agent.")] = (
        "Please refund order 1001"
    ),
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Web app port (taken: any free one).")
    ] = 8000,
    agent: Annotated[
        str,
        typer.Option(
            help="The registered agent to run: refund (LangGraph) or refund_openai (OpenAI "
            "Agents SDK, with the approvals-engine[openai] extra)."
        ),
    ] = "refund",
) -> None:
    """Start a refund run that pauses for approval, serve the web app to decide it (or decide
    from the CLI), and resume the run when it is decided."""
    # Imported here, not at the top: the web app takes over a second to import (see serve).
    from web.serving import bind, demo_login, serving, url_of

    logging.basicConfig(level=logging.WARNING)

    async def main(engine: Engine) -> dict[str, Any]:
        outcome = await engine.start_run(agent, {"message": message}, principal="demo:agent-user")
        typer.echo(f"Started run {outcome.run_id} of the {agent} agent: {message!r}")
        if not outcome.pending:
            return await engine.report(outcome.run_id)
        for request_id in outcome.pending:
            request = await engine.requests.get(request_id)
            assert request is not None
            typer.echo(
                f"\nPaused: {request.tool} {json.dumps(request.shown.get('args'))} waits for a"
                f" decision (request {request_id})."
            )
        first = await engine.requests.get(outcome.pending[0])
        assert first is not None
        user, password = await demo_login(engine, engine.settings.data_dir)
        sock = bind("127.0.0.1", port, fallback=True)
        settings = engine.settings.model_copy(update={"public_url": url_of(sock)})
        how = _how_to_decide(first, user, password, settings.public_url)
        stop = asyncio.Event()
        _stop_on_signals(stop)
        async with serving(settings, sock, engine=engine):
            typer.echo(how)
            await _work_until_settled(engine, outcome.run_id, stop)
        return await engine.report(outcome.run_id)

    # The demo's agents are the examples, registered here whatever the configuration says.
    report = run_async(main, migrate=True, settings_update={"examples": True})
    typer.echo(f"\nRun {report['run_id']} is {report['status']}.")
    if report["answer"]:
        typer.echo(f"The agent answered: {report['answer']}")
    for e in report["tool_executions"]:
        typer.echo(f"  {e['tool']} ({e['call_id']}): {e['status']}")


def _how_to_decide(first: PendingCall, user: str, password: str, public_url: str) -> str:
    """The demo's instructions for deciding ``first``: in the web app, or with the CLI (approve,
    reject and, when the request takes edits, approve a partial refund)."""
    prog = shlex.quote(sys.argv[0]) if sys.argv[0].endswith("approvals") else "approvals"
    decide = f"{prog} decide {first.id}"
    args = dict(first.shown.get("args") or {})
    if isinstance(args.get("amount"), int | float):
        args["amount"] = round(args["amount"] / 2, 2)
        args["reason"] = "partial refund"
    # An OpenAI-SDK agent's requests take no edits (docs/openai-agents.md).
    edit = (
        # An edit is checked against the example's policy: that command must know the examples.
        f"  APPROVALS_EXAMPLES=true {decide} approve --args {shlex.quote(json.dumps(args))}"
        f" --as {user}\n"
        if any(rules.takes_args for rules in first.offered_rules)
        else ""
    )
    return (
        f"\nDecide it in the web app: {public_url}/requests/{first.id}\n"
        f"  sign in as {user} with password {password}\n"
        "\nor from another terminal, in this directory:\n"
        f"  {decide} approve --as {user}\n"
        f"  {decide} reject --reason 'not eligible' --as {user}\n"
        f"{edit}"
        "\nA worker is running here and resumes the run as soon as you decide"
        " (Ctrl-C stops)."
    )


async def _work_until_settled(engine: Engine, run_id: str, stop: asyncio.Event) -> None:
    """Run a worker until the run is neither waiting nor running any more, or ``stop`` is set
    (Ctrl-C)."""
    worker_task = asyncio.create_task(engine.worker.run(stop))
    try:
        while not stop.is_set():
            run = await engine.runs.get(run_id)
            if run is not None and run.status not in (RunStatus.WAITING, RunStatus.RUNNING):
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=0.5)
    finally:
        stop.set()
        await worker_task
