"""What counting a password sign-in in PostgreSQL costs, against the process's own count.

    python bench/sign_in_throttle.py [--attempts N] [--names N]

Each web process counts failed sign-ins in memory (web.security.LoginThrottle); the count every
process shares (storage.sign_ins, migration 0028) is one more statement per attempt, and one
per success. This measures, on a scratch database (``bench/scratch.py``), the time per call of:

* memory: ``LoginThrottle.attempt``;
* shared attempt: ``PgSignInCounts.attempt`` (the name's lock, two count reads, the insert,
  and the few ended rows it deletes), over ``--names`` names so that counts stay under their
  limits, as real sign-ins do;
* shared attempt + success: the attempt and ``succeeded`` (what a sign-in that works costs);
* shared, refused: an attempt at a name at its limit (what a flood of guesses costs).

One connection, one attempt at a time (a password check, scrypt, takes about 0.1 s of CPU:
this is what the throttle adds to it). Median and 95th percentile, in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.scratch import scratch_database
from storage.db import Database, open_pool
from storage.sign_ins import PgSignInCounts
from web.security import LoginThrottle


async def timed(n: int, call: Callable[[int], Awaitable[object]]) -> list[float]:
    took = []
    for i in range(n):
        start = time.perf_counter()
        await call(i)
        took.append((time.perf_counter() - start) * 1000)
    return took


def line(label: str, took: list[float]) -> str:
    q = statistics.quantiles(took, n=20)
    return f"{label:<28} median {statistics.median(took):7.3f} ms   p95 {q[18]:7.3f} ms"


async def main(attempts: int, names: int) -> None:
    async with scratch_database(with_dbos=False) as scratch:
        pool = open_pool(scratch.url, max_size=1)
        await pool.open(wait=True)
        try:
            # The default limits: five per name and address, twenty per name, five minutes.
            shared = PgSignInCounts(Database(pool), attempts=5, window=300, account_attempts=20)
            memory = LoginThrottle(5, 300, account_attempts=20)

            async def in_memory(i: int) -> None:
                memory.attempt(f"user-{i % names}", f"10.0.{i % 200}.1")

            async def attempt(i: int) -> None:
                await shared.attempt(f"user-{i % names}", f"10.1.{i % 200}.1")

            async def signs_in(i: int) -> None:
                name, client = f"ok-{i % names}", "10.2.0.1"
                counted = (await shared.attempt(name, client)).counted
                assert counted is not None
                await shared.succeeded(name, client, counted)

            for _ in range(5):
                await shared.attempt("flooded", "10.3.0.1")

            async def refused(i: int) -> None:
                assert (await shared.attempt("flooded", "10.3.0.1")).counted is None

            await timed(200, attempt)  # warm the pool and the plans
            print(f"sign-in throttle, {attempts} calls each, {scratch.where}")
            print(line("memory attempt", await timed(attempts, in_memory)))
            print(line("shared attempt", await timed(attempts, attempt)))
            print(line("shared attempt + success", await timed(attempts, signs_in)))
            print(line("shared attempt, refused", await timed(attempts, refused)))
        finally:
            await pool.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--attempts", type=int, default=2000)
    parser.add_argument("--names", type=int, default=5000)
    args = parser.parse_args()
    asyncio.run(main(args.attempts, args.names))
