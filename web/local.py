"""``LocalApprovals`` on the engine's PostgreSQL database, for an agent the application invokes
itself (``ApprovalMiddleware(local=...)``): its pending calls show in the inbox and its
decisions in the audit log, and a decision an approver makes there is the one its next resume
reads."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from graphs.langchain.in_process import APP_PRINCIPAL, LocalApprovals
from storage.db import open_database
from storage.local_runs import PgLocalRuns
from storage.requests import PgApprovalRequests, PgDecisions
from storage.runs import PgToolLedger


@asynccontextmanager
async def local_approvals(
    url: str, *, principal: str = APP_PRINCIPAL, pool_size: int = 10
) -> AsyncIterator[LocalApprovals]:
    """``LocalApprovals`` on the (already upgraded) database at ``url``, for the block."""
    async with open_database(url, max_size=pool_size) as db:
        yield LocalApprovals(
            requests=PgApprovalRequests(db),
            decisions=PgDecisions(db),
            ledger=PgToolLedger(db),
            principal=principal,
            runs=PgLocalRuns(db).ensure,
            loop=asyncio.get_running_loop(),
        )
