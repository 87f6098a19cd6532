"""The standing-grant use cases: an operator lists a run's grants and revokes one
(``approvals.grants``). A grant is made by an approver's "always" decision
(``DecideUseCases``); only an operator takes it back, after which the calls ask again."""

from __future__ import annotations

import logging
import uuid

from approvals.errors import InvalidRunId, RunNotAllowed, RunNotFound
from approvals.grants import Grant, GrantNotFound
from approvals.principals import Principal
from web.engine.adapters import Adapters
from web.engine.reads import ReadUseCases, valid_run_id

log = logging.getLogger(__name__)

#: Why a signed-in principal who is no operator is refused.
OPERATORS_ONLY = "only an operator may see or revoke a run's standing grants"


class GrantUseCases:
    """Listing and revoking standing grants (this module's docstring)."""

    def __init__(self, adapters: Adapters, reads: ReadUseCases) -> None:
        self._rules = adapters.rules
        self._grants = adapters.requests
        self._reads = reads

    async def grants_of(self, run_id: str, *, by: Principal | str) -> list[Grant]:
        """Every grant made in a run, oldest first. A signed-in ``by`` must see the run
        (``RunNotFound`` otherwise) and be an operator (``RunNotAllowed``); a plain name is the
        operator console (``InvalidRunId`` for a malformed run id)."""
        run_id = await self._operators_run(run_id, by)
        return await self._grants.grants_of(run_id)

    async def revoke_grant(self, grant_id: str, *, by: Principal | str) -> Grant:
        """Revoke a standing grant: the calls it would have decided ask a human again. The
        audit log says who (``grant.revoked``); revoking a revoked grant changes nothing.
        Raises ``GrantNotFound`` for an unknown id (and, for a signed-in ``by``, one whose run
        they may not see), ``RunNotAllowed`` for a signed-in principal who is no operator."""
        try:
            canonical = str(uuid.UUID(grant_id))
        except (ValueError, AttributeError, TypeError):
            raise GrantNotFound(str(grant_id)) from None
        grant = await self._grants.grant(canonical)
        if grant is None:
            raise GrantNotFound(canonical)
        if isinstance(by, Principal):
            try:
                await self._operators_run(grant.run_id, by)
            except RunNotFound:
                raise GrantNotFound(canonical) from None
        principal = by.id if isinstance(by, Principal) else by
        revoked = await self._grants.revoke_grant(canonical, principal=principal)
        if revoked is None:
            raise GrantNotFound(canonical)
        log.info("grant %s of run %s revoked by %s", canonical, grant.run_id, principal)
        return revoked

    async def _operators_run(self, run_id: str, by: Principal | str) -> str:
        if isinstance(by, Principal):
            run = await self._reads.visible_run(run_id, by)
            if not self._rules.is_operator(by):
                log.warning("refused the grants of run %s to %s", run.id, by.id)
                raise RunNotAllowed(run.id, OPERATORS_ONLY)
            return run.id
        if not valid_run_id(run_id):
            raise InvalidRunId(run_id)
        return run_id
