"""``approvals status``: what this configuration serves (the graphs, their digest) beside what
the database holds for it (the schema, the resume jobs waiting, by graph, and the live workers
with what each serves): the same graphs and digest a web process's ``/readyz`` and a worker's
probe report, so an operator sees whether every process of a rollout agrees, and which queued
jobs no process here, or no live worker, can resume."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from web.cli.command import emit_json, run_async

if TYPE_CHECKING:
    from web.engine import Engine


def status_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show the graphs this configuration serves and their digest, the database's schema, and
    the resume jobs waiting, by graph (naming those no graph here serves)."""

    async def main(engine: Engine) -> dict[str, Any]:
        # Imported here, not at the top: the engine's modules are imported by run_async.
        from web.engine.workers import live_workers, unserved_jobs

        schema = await engine.operations.schema()
        queued = await engine.queue.queued_by_graph()
        served = engine.agent_names()
        workers = await live_workers(engine.adapters.db)
        return {
            "graphs": served,
            "config_digest": engine.registry.config_digest(),
            "schema": {"revision": schema.revision, "problem": schema.problem},
            "queued_jobs": queued,
            "unserved": {g: n for g, n in queued.items() if g not in served},
            "workers": [
                {
                    "id": w.id,
                    "graphs": list(w.graphs),
                    "config_digest": w.config_digest,
                    "seen_at": w.seen_at.isoformat(),
                }
                for w in workers
            ],
            "no_live_worker": await unserved_jobs(engine.adapters.db),
        }

    report = run_async(main)
    if as_json:
        emit_json(report)
        return
    typer.echo(f"graphs: {', '.join(report['graphs'])} ({report['config_digest']})")
    schema = report["schema"]
    problem = f" ({schema['problem']})" if schema["problem"] else ""
    typer.echo(f"schema: {schema['revision']}{problem}")
    queued = report["queued_jobs"]
    typer.echo("queued resumes: " + (", ".join(f"{g} {n}" for g, n in queued.items()) or "none"))
    for w in report["workers"]:
        typer.echo(f"worker {w['id']}: {', '.join(w['graphs'])} ({w['config_digest']})")
    for graph, n in report["no_live_worker"].items():
        typer.echo(
            f"warning: {n} queued resume(s) of graph {graph!r} wait for a worker that serves it:"
            " no live worker does",
            err=True,
        )
    for graph, n in report["unserved"].items():
        typer.echo(
            f"warning: {n} queued resume(s) of graph {graph!r}, which this configuration does not"
            " serve: a worker that serves it must run, or the runs must be cancelled",
            err=True,
        )
