"""Failed password sign-ins counted in PostgreSQL, shared by every web process (migration 0028).

A process's own count (``web.security.LoginThrottle``) bounds only the guesses sent to that
process: N processes behind a load balancer allowed N times the limit. These counts are the
same for all of them. The limits are the process throttle's: at most ``attempts`` failures per
(account name, client address) and ``account_attempts`` per account name whatever the address,
in a sliding window of ``window`` seconds; an attempt is counted when it is let through, before
its password is checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from storage.db import Database


@dataclass(frozen=True, slots=True)
class SignInAttempt:
    """What counting an attempt answered: seconds to wait (0: go on), and the id of the count
    it added (``None`` when it waits)."""

    wait: float
    counted: int | None


class PgSignInCounts:
    def __init__(
        self, db: Database, *, attempts: int, window: float, account_attempts: int
    ) -> None:
        self._db = db
        self._attempts = attempts
        self._account_attempts = account_attempts
        self._window = window

    async def attempt(self, name: str, client: str) -> SignInAttempt:
        """Count an attempt for ``name`` from ``client`` unless either count is at its limit
        (then: how long until it is not). Attempts at one name are counted one at a time,
        whichever process they reach."""
        row = await self._db.one(
            "sign_in_attempt",
            {
                "account": name.lower(),
                "client": client,
                "attempts": self._attempts,
                "account_attempts": self._account_attempts,
                "window": self._window,
            },
        )
        assert row is not None  # the function returns one row
        return SignInAttempt(wait=float(row["wait"]), counted=row["counted"])

    async def succeeded(self, name: str, client: str, counted: int) -> None:
        """The attempt ``counted`` signed in: this client's count for the name ends, and the
        attempt leaves the name's count (not the rest of it, which someone else's guesses may
        have built)."""
        await self._db.run(
            "sign_in_succeeded", {"account": name.lower(), "client": client, "counted": counted}
        )
