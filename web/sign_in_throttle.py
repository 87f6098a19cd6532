"""The password sign-in throttle: this process's count, then the count every process shares.

``LoginThrottle`` (web.security) counts in memory, bounded, and answers a name it already holds
back without a round trip; but it sees only this process's attempts. ``PgSignInCounts``
(storage.sign_ins) counts in PostgreSQL, so that the limits hold for all web processes
together. An attempt goes on only when both let it through. One the shared count refuses is
taken back from this process's count, which otherwise would hold the name back longer than the
shared count does (a name flooded through another process would then stay locked here after
the flood's window ended).
"""

from __future__ import annotations

from dataclasses import dataclass

from storage.sign_ins import PgSignInCounts
from web.security import LoginThrottle


@dataclass(frozen=True, slots=True)
class Counted:
    """Where an attempt let through was counted: its moment in this process's count, and its
    row in the shared one."""

    at: float
    row: int


class SignInThrottle:
    def __init__(self, local: LoginThrottle, shared: PgSignInCounts) -> None:
        self._local = local
        self._shared = shared

    async def attempt(self, name: str, client: str) -> tuple[float, Counted | None]:
        """Seconds until another attempt is allowed (0: go on) and, when it goes on, where it
        was counted (for ``succeeded``)."""
        wait, at = self._local.attempt(name, client)
        if wait:
            return wait, None
        try:
            shared = await self._shared.attempt(name, client)
        except BaseException:
            self._local.withdraw(name, client, at)
            raise
        if shared.counted is None:
            self._local.withdraw(name, client, at)
            return max(shared.wait, 0.001), None
        return 0.0, Counted(at=at, row=shared.counted)

    async def succeeded(self, name: str, client: str, counted: Counted) -> None:
        """The counted attempt signed in (``LoginThrottle.succeeded``, in both counts)."""
        self._local.succeeded(name, client, counted.at)
        await self._shared.succeeded(name, client, counted.row)
