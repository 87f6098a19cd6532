"""The text report of ``bench/approval_cycle.py`` (``--json`` prints the same report as JSON)."""

from __future__ import annotations

from typing import Any


def render(report: dict[str, Any]) -> str:
    dbos = report["dbos"]
    lines = [
        "approval cycle: bare LangGraph vs approvals vs DBOS (same database server, one run)",
        f"database: {report['database']}; pool max {report['pool_max_size']}; "
        f"python {report['python']} on {report['event_loop']}'s loop, {report['cpus']} cpus,"
        " load average " + " ".join(f"{x:.2f}" for x in report["load_average"]),
        f"ours resumes via {report['resume_path']}; bare runs with durability="
        f"{report['bare_durability']}, ours with sync; bare's saver {report['bare_saver']}; "
        f"emitter {report['emitter']}",
        f"dbos: {dbos['version']}, system tables in a database of their own"
        if "version" in dbos
        else f"dbos: NOT measured: {dbos['missing']}",
        "",
        f"{'conc':>4}  {'variant':<10} {'cycles':>6} {'p50 ms':>8} {'p99 ms':>8} {'cycles/s':>9}"
        f" {'cpu ms':>7} {'db cpu':>7}   phases p50 ms (cpu: this process's, db cpu: the"
        " server's backends', per cycle)",
    ]
    for r in report["results"]:
        for v in ("bare", "floor", "floor+emit", "stmts", "ours", "dbos"):
            if v not in r:
                continue
            s = r[v]
            phases = "  ".join(f"{k} {ms:.2f}" for k, ms in s["phases_p50_ms"].items())
            lines.append(
                f"{r['concurrency']:>4}  {v:<10} {s['cycles']:>6} {s['p50_ms']:>8.2f} "
                f"{s['p99_ms']:>8.2f} {s['throughput_per_s']:>9.1f} {s['cpu_ms_per_cycle']:>7.2f}"
                f" {s['server_cpu_ms_per_cycle'] or float('nan'):>7.2f}   {phases}"
            )

        def ratio_line(
            label: str, ratio: dict[str, float], note: str, conc: int = r["concurrency"]
        ) -> str:
            return (
                f"{conc:>4}  {label:<10} {'':>6} {ratio['p50']:>7.2f}x "
                f"{ratio['p99']:>7.2f}x {ratio['throughput']:>8.2f}x {ratio['cpu']:>6.2f}x "
                f"{ratio.get('server_cpu', float('nan')):>6.2f}x   {note}"
            )

        verdict = "met" if r["target_met"] else "NOT met"
        lines.append(
            ratio_line(
                "ours/bare",
                r["ratio"],
                f"(throughput bare/ours, cpus ours/bare) target <= {report['target']}: {verdict}",
            )
        )
        lines.append(
            ratio_line(
                "floor",
                r["floor_ratio"],
                f"(bare + {report['required_commits']} one-row commits, over bare: no "
                "implementation can beat this here)",
            )
        )
        lines.append(
            ratio_line(
                "floor+emit",
                r["floor_emit_ratio"],
                f"(the floor + this cycle's {report['emissions_per_cycle']} emissions through "
                f"{report['emitter']}, over bare)",
            )
        )
        lines.append(
            ratio_line(
                "stmts",
                r["stmts_ratio"],
                "(bare + the engine's own statements of a cycle, as it writes them, and the "
                "emissions, over bare)",
            )
        )
        lines.append(
            ratio_line(
                "ours/stmts",
                r["ours_over_stmts"],
                "(the engine's orchestration between its statements, and durability=sync)",
            )
        )
        if "dbos_ratio" in r:
            lines.append(ratio_line("dbos/bare", r["dbos_ratio"], ""))
            verdict = "met" if r["dbos_target_met"] else "NOT met"
            lines.append(
                ratio_line("ours/dbos", r["ours_over_dbos"], f"target p50 <= 1: {verdict}")
            )
        lines.append("")
    checks = report["checks"]
    lines.append(
        f"target ours/bare <= {report['target']} at p50 and p99, c=1 and c=16: "
        f"{'met' if report['target_met'] else 'NOT met'}"
    )
    if report["dbos_target_met"] is not None:
        lines.append(
            f"target ours p50 <= dbos p50, c=1 and c=16: "
            f"{'met' if report['dbos_target_met'] else 'NOT met'}"
        )
    lines.append(
        f"check: {checks['side_effects']} side-effect rows for {checks['expected_side_effects']} "
        f"cycles, tool ran once per cycle: {checks['tool_ran_once_per_cycle']}, "
        f"jobs left queued: {checks['jobs_left_queued']}"
    )
    if report["counts_per_cycle"]:
        lines.append("")
        lines.append("per cycle (c=1): statements sent (psycopg async), server commits")
        for v, c in report["counts_per_cycle"].items():
            lines.append(
                f"  {v:<6} statements {c['statements_per_cycle']:>6.2f}   "
                f"commits {c['server_commits_per_cycle']:>6.2f}"
            )
            for text, n in c["statements"].items():
                lines.append(f"      {n:>5.2f}  {text}")
    if report["trace"]:
        lines.append("")
        lines.append(
            "trace (c=1, ms per cycle; op times exclude nested ops; saver writes run in the "
            "background, so ops may overlap each other and the phase's python)"
        )
        for phases in report["trace"].values():
            for name, p in phases.items():
                lines.append(f"  {name:<34} {p['ms_per_cycle']:>8.3f}")
                for label, op in p["ops"].items():
                    lines.append(
                        f"      {label:<40} x{op['per_cycle']:<5} {op['ms_per_cycle']:>8.3f}"
                    )
    return "\n".join(lines)
