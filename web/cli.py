"""The ``approvals`` command line: a composition root like the web app.

JSON goes to stdout where a command promises it; errors are one line on stderr. Exit codes:
0 success, 1 failure (database unreachable, run failed), 2 invalid input, 3 conflict (request no
longer pending, thread still waiting, run already ended), 4 not found.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import logging
import os
import shlex
import signal
import sys
import traceback
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from approvals import json_values
from approvals.errors import (
    AccountExists,
    AlreadyVoted,
    ApprovalsError,
    EditedArgumentsInvalid,
    GraphNotFound,
    InvalidAccount,
    InvalidDecision,
    InvalidRequestId,
    InvalidRunId,
    InvalidRunInput,
    InvalidValue,
    RequestNotFound,
    RequestNotPending,
    RunEnded,
    RunNotFound,
    RuntimeRoleRefused,
    ThreadBusy,
)
from approvals.model import RequestStatus, RunStatus
from web.cli_accounts import sessions_app, tokens_app, users_app
from web.cli_audit import audit_app
from web.cli_notifications import notifications_app
from web.cli_ops import retention_app, runs_cancel
from web.cli_outcomes import outcomes_app
from web.cli_policy import policy_app
from web.engine import Engine, open_engine
from web.logs import configure_logging
from web.runs import run_report
from web.settings import Settings, check_pool_size, load_settings

T = TypeVar("T")

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="approvals: durable human approval for AI agents' sensitive tool calls.",
)
db_app = typer.Typer(no_args_is_help=True, help="Database schema.")
runs_app = typer.Typer(no_args_is_help=True, help="Start and inspect runs.")
pending_app = typer.Typer(no_args_is_help=True, help="Calls waiting for a decision.")
app.add_typer(db_app, name="db")
app.add_typer(runs_app, name="runs")
app.add_typer(pending_app, name="pending")
tools_app = typer.Typer(no_args_is_help=True, help="The tools graphs may call.")
app.add_typer(tools_app, name="tools")
app.add_typer(policy_app, name="policy")
app.add_typer(users_app, name="users")
app.add_typer(tokens_app, name="tokens")
app.add_typer(sessions_app, name="sessions")
app.add_typer(retention_app, name="retention")
runs_app.command("cancel")(runs_cancel)
app.add_typer(audit_app, name="audit")
app.add_typer(outcomes_app, name="outcomes")
app.add_typer(notifications_app, name="notifications")

EXIT_FAILURE, EXIT_INVALID, EXIT_NOT_PENDING, EXIT_NOT_FOUND = 1, 2, 3, 4


def _exit_code(exc: ApprovalsError) -> int:
    if isinstance(exc, RequestNotPending | ThreadBusy | AlreadyVoted | AccountExists | RunEnded):
        return EXIT_NOT_PENDING
    if isinstance(exc, RequestNotFound | RunNotFound | GraphNotFound):
        return EXIT_NOT_FOUND
    if isinstance(
        exc,
        InvalidRequestId
        | InvalidRunId
        | InvalidDecision
        | EditedArgumentsInvalid
        | InvalidRunInput
        | InvalidValue
        | InvalidAccount
        | RuntimeRoleRefused,
    ):
        return EXIT_INVALID
    return EXIT_FAILURE


def fail(message: str, code: int) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def emit_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, sort_keys=True, default=str))


def emit_listing(
    items: list[dict[str, Any]],
    *,
    as_json: bool,
    empty: str,
    line: Callable[[dict[str, Any]], str],
) -> None:
    """A list command's output: the items as JSON, or else one line each (``empty`` when
    there are none)."""
    if as_json:
        emit_json(items)
        return
    if not items:
        typer.echo(empty)
    for item in items:
        typer.echo(line(item))


def parse_json(option: str, text: str) -> Any:
    """A JSON option, parsed by the engine's rules (no NaN, no NUL, no deep nesting): exit 2
    naming the option otherwise."""
    try:
        return json_values.parse_json(option, text)
    except InvalidValue as exc:
        fail(str(exc), EXIT_INVALID)


def database_url(settings: Settings) -> tuple[str, bool]:
    """The configured server, or the embedded one (started on demand). ``(url, embedded)``."""
    if settings.database_url:
        return settings.database_url, False
    from storage.embedded import start_embedded

    return start_embedded(settings.data_dir / "pg"), True


def migration_url(settings: Settings, url: str) -> str:
    """Where migrations run: the tables' owner (``APPROVALS_MIGRATION_DATABASE_URL``) when set,
    else ``url``, the database the engine uses."""
    return settings.migration_database_url or url


def run_async(
    fn: Callable[[Engine], Awaitable[T]],
    *,
    migrate: bool = False,
    settings_update: dict[str, Any] | None = None,
) -> T:
    """Open the engine for one command and map engine errors to exit codes."""

    async def main() -> T:
        settings = load_settings()
        if settings_update:
            settings = settings.model_copy(update=settings_update)
            check_pool_size(settings.pool_max_size, settings.worker_concurrency)
        url, embedded = database_url(settings)
        if migrate or embedded:
            from storage.migrate import upgrade

            await upgrade(migration_url(settings, url), runtime_role=settings.runtime_role)
        async with open_engine(url, settings) as engine:
            return await fn(engine)

    return guarded(lambda: asyncio.run(main()))


def guarded(call: Callable[[], T]) -> T:
    """Engine errors become their exit code; anything unexpected one line and exit 1 (with the
    traceback when APPROVALS_DEBUG=1)."""
    try:
        return call()
    except ApprovalsError as exc:
        if os.environ.get("APPROVALS_DEBUG") == "1":
            traceback.print_exc()
        fail(str(exc), _exit_code(exc))
    except Exception as exc:
        if os.environ.get("APPROVALS_DEBUG") == "1":
            raise
        first = str(exc).splitlines()[0] if str(exc) else ""
        fail(f"unexpected {type(exc).__name__}: {first} (APPROVALS_DEBUG=1 shows more)", 1)


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply the engine's migrations and LangGraph's checkpoint tables (idempotent)."""

    from storage.migrate import upgrade

    async def main() -> None:
        settings = load_settings()
        url, _ = database_url(settings)
        await upgrade(migration_url(settings, url), runtime_role=settings.runtime_role)

    guarded(lambda: asyncio.run(main()))
    typer.echo("database is up to date")


@db_app.command("grant")
def db_grant(
    role: Annotated[str, typer.Argument(help="The role serve, workers and the CLI connect as.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Grant ROLE exactly what the engine needs and no ownership (run with the owner's URL,
    APPROVALS_MIGRATION_DATABASE_URL; again after each upgrade, or set APPROVALS_RUNTIME_ROLE)."""
    from storage.roles import Grant, grant_runtime

    async def main() -> list[Grant]:
        settings = load_settings()
        url, _ = database_url(settings)
        return await grant_runtime(migration_url(settings, url), role)

    grants = guarded(lambda: asyncio.run(main()))
    if as_json:
        emit_json({"role": role, "grants": [g.to_json() for g in grants]})
        return
    for grant in grants:
        typer.echo(f"{grant.object}: {grant.privileges}")
    typer.echo(f"role {role} holds only these privileges on the engine's objects and owns none")


def default_principal() -> str:
    return f"cli:{getpass.getuser()}"


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
        # The same events as GET /api/v1/runs/{id}/events sends (web.run_stream).
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
        outcome = await engine.runner.start(
            graph,
            payload,
            principal=principal or default_principal(),
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
    """Show a run: its status, pending requests and tool executions."""
    report = run_async(lambda engine: run_report(engine, run_id))
    if as_json:
        emit_json(report)
        return
    typer.echo(f"run {report['run_id']} ({report['graph']}): {report['status']}")
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


@pending_app.command("list")
def pending_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    include_all: Annotated[bool, typer.Option("--all", help="Include decided requests.")] = False,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 200,
) -> None:
    """List approval requests waiting for a decision (newest first)."""

    async def main(engine: Engine) -> list[dict[str, Any]]:
        status = None if include_all else RequestStatus.PENDING
        return [r.to_json() for r in await engine.requests.search(status, limit)]

    emit_listing(
        run_async(main),
        as_json=as_json,
        empty="nothing is waiting for a decision",
        line=lambda r: (
            f"{r['id']}  {r['tool']}  {json.dumps(r['shown'].get('args'))}  {r['status']}"
        ),
    )


@tools_app.command("list")
def tools_list(
    graph: Annotated[str | None, typer.Argument(help="Only this graph's tools.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List each graph's tools with their arguments, conditions and metadata."""

    async def main(engine: Engine) -> dict[str, list[dict[str, Any]]]:
        names = [graph] if graph is not None else engine.registry.names()
        return {name: [t.describe() for t in engine.registry.tools(name)] for name in names}

    listing = run_async(main)
    if as_json:
        emit_json(listing)
        return
    for name, tools in listing.items():
        typer.echo(f"{name}:")
        for t in tools:
            mark = "needs approval" if t["sensitive"] else "runs directly"
            typer.echo(f"  {t['name']} ({mark}): {t['description'].splitlines()[0]}")
            for rule in t["preconditions"]:
                typer.echo(f"    before: {rule['name']}: {rule['description']}")
            for rule in t["postconditions"]:
                typer.echo(f"    after:  {rule['name']}: {rule['description']}")


@app.command("decide")
def decide_command(
    request_id: str,
    verdict: Annotated[
        str,
        typer.Argument(help="approve, reject or respond", metavar="approve|reject|respond"),
    ],
    principal: Annotated[str, typer.Option("--as", help="Who decides (required).")],
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (required to reject).")
    ] = None,
    args: Annotated[
        str | None,
        typer.Option("--args", help="Edited arguments (JSON object) to approve instead."),
    ] = None,
    message: Annotated[
        str | None,
        typer.Option(
            "--message", help="With respond: the answer the model gets as the tool's result."
        ),
    ] = None,
) -> None:
    """Approve, reject or respond to a pending call (respond: the tool does not run; --message
    is its result). Exit 3: no longer pending; 4: no such request."""
    edited = parse_json("--args", args) if args is not None else None

    async def main(engine: Engine) -> dict[str, Any]:
        decision = await engine.decide(
            request_id, verdict, principal=principal, reason=reason, args=edited, message=message
        )
        return decision.to_json()

    emit_json(run_async(main))


def _stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)


@app.command("worker")
def worker_command(
    drain: Annotated[
        bool,
        typer.Option(
            "--drain", help="Expire what is past its deadline, resume what is queued, then exit."
        ),
    ] = False,
    concurrency: Annotated[int | None, typer.Option(min=1, max=64)] = None,
) -> None:
    """Resume runs whose calls were decided, and expire (or escalate) requests past their
    deadline every APPROVALS_SWEEP_INTERVAL_SECONDS. Runs until SIGTERM/SIGINT unless --drain."""
    from graphs.worker import ExpirySweeper
    from storage.expiry import PgExpiry

    guarded(lambda: configure_logging(load_settings()))

    async def main(engine: Engine) -> int:
        worker = engine.worker
        sweeper = ExpirySweeper(
            expiry=PgExpiry(engine.db), interval=engine.settings.sweep_interval_seconds
        )
        if drain:
            # Expired requests queue resume jobs: sweep first so the drain resumes them too.
            await sweeper.sweep()
            return await worker.drain()
        stop = asyncio.Event()
        _stop_on_signals(stop)
        await asyncio.gather(worker.run(stop), sweeper.run(stop), engine.notifier.run(stop))
        return 0

    update = {"worker_concurrency": concurrency} if concurrency is not None else None
    done = run_async(main, settings_update=update)
    if drain:
        typer.echo(json.dumps({"resumed": done}))


@app.command("serve")
def serve_command(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="0: any free port.")] = 8000,
    with_worker: Annotated[
        bool, typer.Option("--with-worker", help="Also resume decided runs in this process.")
    ] = False,
) -> None:
    """Serve the approvers' web app (and the JSON API) until SIGTERM/SIGINT."""
    from storage.migrate import upgrade
    from web.serving import bind, serve_forever, serving, url_of

    guarded(lambda: configure_logging(load_settings()))

    async def serve() -> None:
        settings = load_settings()
        url, _ = database_url(settings)
        await upgrade(migration_url(settings, url), runtime_role=settings.runtime_role)
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
        async with serving(settings, sock, database_url=url, with_worker=with_worker) as server:
            typer.echo(f"serving {settings.public_url} (API docs at /api/docs)")
            await serve_forever(server, stop)

    guarded(lambda: asyncio.run(serve()))


@app.command("demo")
def demo_command(
    message: Annotated[str, typer.Option(help="What to ask the refund agent.")] = (
        "Please refund order 1001"
    ),
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Web app port (taken: any free one).")
    ] = 8000,
) -> None:
    """Start a refund run that pauses for approval, serve the web app to decide it (or decide
    from the CLI), and resume the run when it is decided."""
    from web.serving import bind, demo_login, serving, url_of

    logging.basicConfig(level=logging.WARNING)

    async def main(engine: Engine) -> dict[str, Any]:
        outcome = await engine.runner.start(
            "refund", {"message": message}, principal="demo:agent-user"
        )
        typer.echo(f"Started run {outcome.run_id} of the refund agent: {message!r}")
        if not outcome.pending:
            return await run_report(engine, outcome.run_id)
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
        prog = shlex.quote(sys.argv[0]) if sys.argv[0].endswith("approvals") else "approvals"
        decide = f"{prog} decide {first.id}"
        args = dict(first.shown.get("args") or {})
        if isinstance(args.get("amount"), int | float):
            args["amount"] = round(args["amount"] / 2, 2)
            args["reason"] = "partial refund"
        stop = asyncio.Event()
        _stop_on_signals(stop)
        async with serving(settings, sock, engine=engine):
            typer.echo(
                f"\nDecide it in the web app: {settings.public_url}/requests/{first.id}\n"
                f"  sign in as {user} with password {password}\n"
                "\nor from another terminal, in this directory:\n"
                f"  {decide} approve --as demo:approver\n"
                f"  {decide} reject --reason 'not eligible' --as demo:approver\n"
                f"  {decide} approve --args {shlex.quote(json.dumps(args))} --as demo:approver\n"
                "\nA worker is running here and resumes the run as soon as you decide"
                " (Ctrl-C stops)."
            )
            worker_task = asyncio.create_task(engine.worker.run(stop))
            try:
                while not stop.is_set():
                    run = await engine.runs.get(outcome.run_id)
                    if run is not None and run.status not in (RunStatus.WAITING, RunStatus.RUNNING):
                        break
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), timeout=0.5)
            finally:
                stop.set()
                await worker_task
        return await run_report(engine, outcome.run_id)

    report = run_async(main, migrate=True)
    typer.echo(f"\nRun {report['run_id']} is {report['status']}.")
    if report["answer"]:
        typer.echo(f"The agent answered: {report['answer']}")
    for e in report["tool_executions"]:
        typer.echo(f"  {e['tool']} ({e['call_id']}): {e['status']}")


def main() -> None:
    """Entry point of the ``approvals`` script."""
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover - interactive
        sys.exit(130)
