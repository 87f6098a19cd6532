"""Failed password sign-ins counted in PostgreSQL (storage.sign_ins, migration 0028): the limits
hold for every web process together, with the process throttle's properties (per name and
address, per name across addresses, a success takes back only its own attempt).

Two engines on one database stand for two web processes: each has its own connection pool.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest_asyncio

from storage.sign_ins import PgSignInCounts
from web.engine import open_engine
from web.security import LoginThrottle
from web.settings import Settings
from web.sign_in_throttle import SignInThrottle

WINDOW = 300


def settings_for(database_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=database_url,
        data_dir=tmp_path,
        config_file=tmp_path / "none.toml",
        login_attempts=3,
        login_account_attempts=6,
        login_window_seconds=WINDOW,
    )


@pytest_asyncio.fixture(loop_scope="session")
async def two(database_url: str, tmp_path: Path) -> AsyncIterator[tuple[PgSignInCounts, ...]]:
    """The shared counts as two processes see them."""
    settings = settings_for(database_url, tmp_path)
    async with open_engine(database_url, settings) as a, open_engine(database_url, settings) as b:
        yield a.sign_ins, b.sign_ins


async def test_two_processes_together_allow_no_more_than_the_limit(
    two: tuple[PgSignInCounts, PgSignInCounts],
) -> None:
    one, other = two
    # One by one, alternating: three in all, not three each.
    let_through = [
        (await (one if i % 2 else other).attempt("ann", "198.51.100.7")).wait == 0 for i in range(8)
    ]
    assert let_through == [True] * 3 + [False] * 5
    # Sent at once to both: each name's attempts are counted one at a time.
    answers = await asyncio.gather(
        *((one, other)[i % 2].attempt("bob", "198.51.100.7") for i in range(20))
    )
    assert sum(a.counted is not None for a in answers) == 3
    assert all(a.wait > 0 for a in answers if a.counted is None)


async def test_the_limits_are_per_name_and_address_and_per_name(
    two: tuple[PgSignInCounts, PgSignInCounts],
) -> None:
    one, other = two
    for _ in range(3):
        assert (await one.attempt("Ann", "198.51.100.7")).wait == 0
    assert (await other.attempt("ann", "198.51.100.7")).wait > 0  # names fold case
    assert (await other.attempt("bob", "198.51.100.7")).wait == 0  # her colleagues behind NAT
    assert (await other.attempt("ann", "192.0.2.1")).wait == 0  # and ann herself, elsewhere
    # Guessing from many addresses: the name's own limit (6) stops it.
    for i in range(2):
        assert (await (one, other)[i % 2].attempt("ann", f"203.0.113.{i}")).wait == 0
    assert (await one.attempt("ann", "203.0.113.200")).wait > 0
    assert (await one.attempt("bob", "203.0.113.200")).wait == 0


async def test_a_success_takes_back_only_its_own_attempt(
    two: tuple[PgSignInCounts, PgSignInCounts],
) -> None:
    one, other = two
    for i in range(4):
        await one.attempt("ann", f"203.0.113.{i}")  # someone else's guesses
    await other.attempt("ann", "198.51.100.7")  # her own typo
    mine = await other.attempt("ann", "198.51.100.7")  # the name's sixth
    assert mine.counted is not None
    await one.succeeded("ann", "198.51.100.7", mine.counted)
    # Her sign-in is not a guess against her account: room for one more. The others' four and
    # her typo still count towards the name's six.
    assert (await one.attempt("ann", "192.0.2.1")).wait == 0
    assert (await other.attempt("ann", "192.0.2.2")).wait > 0


async def test_a_success_clears_its_address_count(
    two: tuple[PgSignInCounts, PgSignInCounts],
) -> None:
    one, other = two
    await one.attempt("dave", "198.51.100.7")  # a typo
    mine = await other.attempt("dave", "198.51.100.7")
    assert mine.counted is not None
    await other.succeeded("dave", "198.51.100.7", mine.counted)
    # The typo no longer counts against the address: three more, as from a fresh start.
    for i in range(3):
        assert (await (one, other)[i % 2].attempt("dave", "198.51.100.7")).wait == 0, i
    assert (await one.attempt("dave", "198.51.100.7")).wait > 0


async def test_a_failure_leaves_the_count_when_its_window_ends(
    two: tuple[PgSignInCounts, PgSignInCounts], database_url: str
) -> None:
    one, _ = two
    for _ in range(3):
        await one.attempt("carol", "192.0.2.1")
    waited = await one.attempt("carol", "192.0.2.1")
    assert 0 < waited.wait <= WINDOW
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        # As if the first failure were a window old, and the others nearly.
        await conn.execute(
            "UPDATE sign_in_failures SET at = at - make_interval(secs => %s)"
            " WHERE account = 'carol'",
            (WINDOW - 5,),
        )
        await conn.execute(
            "UPDATE sign_in_failures SET at = at - interval '5 seconds' WHERE id ="
            " (SELECT min(id) FROM sign_in_failures WHERE account = 'carol')"
        )
    assert (await one.attempt("carol", "192.0.2.1")).wait == 0
    # The next wait ends when the next failure leaves: about five seconds from now.
    assert 0 < (await one.attempt("carol", "192.0.2.1")).wait <= 5


async def test_an_attempt_the_shared_count_refuses_leaves_the_process_count(
    two: tuple[PgSignInCounts, PgSignInCounts],
) -> None:
    one, other = two
    here = LoginThrottle(attempts=3, window=WINDOW, account_attempts=6)
    throttle = SignInThrottle(here, one)
    for _ in range(3):
        await other.attempt("erin", "198.51.100.7")  # guesses through another process
    for _ in range(5):
        wait, counted = await throttle.attempt("erin", "198.51.100.7")
        assert wait > 0
        assert counted is None
    # Nothing was let through here, so nothing is held here: once the shared count's window
    # ends, this process does not hold the name back on its own.
    assert here.blocked("erin", "198.51.100.7") == 0
    assert not here._failures
