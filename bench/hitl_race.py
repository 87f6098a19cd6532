"""Racing resumes of one paused refund: how many times the approved tool runs.

    python bench/hitl_race.py [--trials N] [--racers R [R ...]] [--tool-seconds S]
                              [--no-sync] [--no-postgres] [--json]

Each trial builds langchain's ``create_agent`` agent with a scripted model, one ``issue_refund``
tool and LangGraph's ``InMemorySaver``, invokes it until it pauses on the refund, then resumes
it R times at once with the same ``Command(resume={"decisions": [{"type": "approve"}]})`` and
counts how many times the tool body ran (issue 31: HumanInTheLoopMiddleware ran it once per
racing resume). The tool sleeps ``--tool-seconds`` (default 0.05, as in
tests/integration/test_hitl_in_process.py) so that the resumes overlap while it runs.

* hitl: langchain's ``HumanInTheLoopMiddleware``.
* ours memory: ``graphs.ApprovalMiddleware`` with its default ``LocalApprovals`` (in memory).
* ours postgres: ``ApprovalMiddleware(local=...)`` with ``web.local.local_approvals`` on a
  scratch database (``bench/scratch.py``: created on ``APPROVALS_DATABASE_URL``'s server, or
  else the embedded one, migrated, and dropped afterwards). Skipped, with the reason, when no
  database can be had.

Each runs async (the racers are ``ainvoke`` calls gathered on one event loop) and, unless
``--no-sync``, sync (one thread per racer calling ``invoke``, released together by a barrier;
the pause is a sync ``invoke`` too). On PostgreSQL the sync racers run while the event loop that
opened ``local_approvals``'s pool keeps running, and they race one conversation at a time: each
``invoke`` runs the middleware's coroutines on a loop of its own, and the racers of one
conversation take its lock in turn.

Per variant: trials, racers, the tool's runs in all, the trials where it ran more than once,
the trials where it never ran (an approved refund that did not happen), and the resumes that
raised. Exit status 0 whatever the counts: this is a bench; the invariant is tested in
tests/integration/test_hitl_in_process.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from graphs.examples.scripted import ScriptedToolModel
from graphs.langchain.middleware import ApprovalMiddleware, LocalApprovals

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: the bench package beside the engine's
    sys.path.insert(0, str(ROOT))

from bench.scratch import scratch_database  # noqa: E402

APPROVE = {"decisions": [{"type": "approve"}]}
REFUND = {"order_id": "1001", "amount": 25.0}
#: A trial whose resumes have not all returned by then counts its stragglers as errors.
TRIAL_TIMEOUT_S = 60.0
PG = "ours postgres"

Middleware = Callable[[], AgentMiddleware[Any, Any]]


@dataclass
class Tally:
    variant: str
    mode: str
    trials: int
    racers: int
    tool_runs: int = 0
    trials_ran_more_than_once: int = 0
    trials_never_ran: int = 0
    resumes_raised: int = 0
    first_error: str | None = None

    def add(self, runs: int, errors: list[BaseException]) -> None:
        self.tool_runs += runs
        self.trials_ran_more_than_once += runs > 1
        self.trials_never_ran += runs == 0
        self.resumes_raised += len(errors)
        if errors and self.first_error is None:
            self.first_error = f"{type(errors[0]).__name__}: {errors[0]}"[:300]


def refund_agent(middleware: AgentMiddleware[Any, Any], ran: list[str], pause_s: float) -> Any:
    @tool
    def issue_refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        time.sleep(pause_s)
        ran.append(order_id)  # list.append is atomic: racing threads each leave their mark
        return f"refunded {amount} on {order_id}"

    def script(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(content=f"done: {messages[-1].content}")
        return AIMessage(
            content="", tool_calls=[{"name": "issue_refund", "args": REFUND, "id": "r1"}]
        )

    return create_agent(
        model=ScriptedToolModel(script=script),
        tools=[issue_refund],
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )


def new_thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


def paused(out: dict[str, Any]) -> None:
    if not out.get("__interrupt__"):
        raise RuntimeError(f"the agent did not pause on the refund: {out}")


async def async_trial(make: Middleware, racers: int, pause_s: float) -> tuple[int, list[Any]]:
    ran: list[str] = []
    agent = refund_agent(make(), ran, pause_s)
    config = new_thread()
    paused(await agent.ainvoke({"messages": [HumanMessage("refund 1001")]}, config))
    outcomes = await asyncio.wait_for(
        asyncio.gather(
            *(agent.ainvoke(Command(resume=APPROVE), config) for _ in range(racers)),
            return_exceptions=True,
        ),
        TRIAL_TIMEOUT_S,
    )
    return len(ran), [o for o in outcomes if isinstance(o, BaseException)]


def sync_trial(make: Middleware, racers: int, pause_s: float) -> tuple[int, list[Any]]:
    ran: list[str] = []
    agent = refund_agent(make(), ran, pause_s)
    config = new_thread()
    paused(agent.invoke({"messages": [HumanMessage("refund 1001")]}, config))
    start = threading.Barrier(racers)
    errors: list[BaseException] = []

    def resume() -> None:
        start.wait()
        try:
            agent.invoke(Command(resume=APPROVE), config)
        except BaseException as e:  # a racer's failure is counted, not fatal
            errors.append(e)

    # Daemon threads: a racer that never returns is counted and does not hold the bench.
    threads = [threading.Thread(target=resume, daemon=True) for _ in range(racers)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + TRIAL_TIMEOUT_S
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    hung = [t for t in threads if t.is_alive()]
    errors.extend(TimeoutError(f"resume still running after {TRIAL_TIMEOUT_S} s") for _ in hung)
    return len(ran), errors


async def async_tally(
    variant: str, make: Middleware, trials: int, racers: int, pause_s: float
) -> Tally:
    tally = Tally(variant, "async", trials, racers)
    for _ in range(trials):
        tally.add(*await async_trial(make, racers, pause_s))
    return tally


def sync_tally(variant: str, make: Middleware, trials: int, racers: int, pause_s: float) -> Tally:
    tally = Tally(variant, "sync", trials, racers)
    for _ in range(trials):
        tally.add(*sync_trial(make, racers, pause_s))
    return tally


def hitl() -> AgentMiddleware[Any, Any]:
    return HumanInTheLoopMiddleware(interrupt_on={"issue_refund": True})


def ours_in_memory() -> AgentMiddleware[Any, Any]:
    return ApprovalMiddleware(interrupt_on={"issue_refund": True})


def ours_on(local: LocalApprovals) -> Middleware:
    return lambda: ApprovalMiddleware(interrupt_on={"issue_refund": True}, local=local)


async def postgres_tallies(args: argparse.Namespace) -> tuple[list[Tally], str]:
    """The PostgreSQL variants, or no tallies and why they did not run."""
    from web.local import local_approvals

    async with AsyncExitStack() as stack:
        try:
            scratch = await stack.enter_async_context(scratch_database(with_dbos=False))
            local = await stack.enter_async_context(
                local_approvals(scratch.url, principal="app:bench")
            )
        except Exception as e:  # no database is a skip, with its reason
            why = " ".join(str(e).split())
            return [], f"skipped: no PostgreSQL ({type(e).__name__}: {why})"
        tallies: list[Tally] = []
        for r in args.racers:
            make = ours_on(local)
            tallies.append(await async_tally(PG, make, args.trials, r, args.tool_seconds))
            if not args.no_sync:
                # The racing threads' invoke calls run the middleware's coroutines on loops of
                # their own; this loop, which owns the pool, keeps running meanwhile.
                tallies.append(
                    await asyncio.to_thread(sync_tally, PG, make, args.trials, r, args.tool_seconds)
                )
        return tallies, scratch.where
    raise AssertionError("unreachable")


def bench(args: argparse.Namespace) -> dict[str, Any]:
    tallies: list[Tally] = []
    variants: list[tuple[str, Middleware]] = [("hitl", hitl), ("ours memory", ours_in_memory)]
    for r in args.racers:
        for name, make in variants:
            tallies.append(asyncio.run(async_tally(name, make, args.trials, r, args.tool_seconds)))
            if not args.no_sync:
                tallies.append(sync_tally(name, make, args.trials, r, args.tool_seconds))
    if args.no_postgres:
        postgres = "skipped: --no-postgres"
    else:
        on_postgres, postgres = asyncio.run(postgres_tallies(args))
        tallies.extend(on_postgres)
    return {
        "trials": args.trials,
        "racers": args.racers,
        "tool_seconds": args.tool_seconds,
        "postgres": postgres,
        "variants": [asdict(t) for t in tallies],
    }


def render(report: dict[str, Any]) -> str:
    lines = [
        f"one paused refund, racing Command(resume=approve); {report['trials']} trials per row, "
        f"the tool sleeps {report['tool_seconds']} s",
        f"postgres: {report['postgres']}",
        "",
        f"{'variant':<14} {'mode':<6} {'racers':>6} {'trials':>6} {'tool runs':>9} "
        f"{'ran >1':>6} {'ran 0':>5} {'raised':>6}",
    ]
    for t in sorted(report["variants"], key=lambda t: (t["racers"], t["mode"])):
        lines.append(
            f"{t['variant']:<14} {t['mode']:<6} {t['racers']:>6} {t['trials']:>6} "
            f"{t['tool_runs']:>9} {t['trials_ran_more_than_once']:>6} "
            f"{t['trials_never_ran']:>5} {t['resumes_raised']:>6}"
        )
    lines.extend(
        f"  {t['variant']} {t['mode']} x{t['racers']}: first error {t['first_error']}"
        for t in report["variants"]
        if t["first_error"]
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--trials", type=int, default=20, help="trials per variant and racers")
    parser.add_argument(
        "--racers", type=int, nargs="+", default=[4, 8], help="racing resumes per trial"
    )
    parser.add_argument(
        "--tool-seconds", type=float, default=0.05, help="how long the refund tool takes"
    )
    parser.add_argument("--no-sync", action="store_true", help="leave the threaded invoke out")
    parser.add_argument("--no-postgres", action="store_true", help="leave PostgreSQL out")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = bench(args)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
