"""The decide use cases: a signed-in approver's decision (``decide``), the operator console's
(``decide_as_operator``), and the principal the console's ``--as`` names
(``console_principal``). The approver rules are applied here, for every caller."""

from __future__ import annotations

from typing import Any

from approvals.decision_kinds import Ruling
from approvals.decisions import decide
from approvals.errors import InvalidValue, RequestNotFound
from approvals.model import DecisionRecord, PendingCall, Vote
from approvals.principals import Principal, console_name
from web.engine.adapters import Adapters
from web.engine.edits import EditCheck
from web.engine.reads import ReadUseCases


class DecideUseCases:
    """Deciding a pending call (this module's docstring)."""

    def __init__(self, adapters: Adapters, reads: ReadUseCases, edits: EditCheck) -> None:
        self._rules = adapters.rules
        self._requests = adapters.requests
        self._decisions = adapters.decisions
        self._accounts = adapters.accounts
        self._settings = adapters.settings
        self._reads = reads
        self._edits = edits

    async def decide(
        self,
        request_id: str,
        verdict: Ruling | str,
        *,
        principal: Principal,
        reason: str | None = None,
        args: dict[str, Any] | None = None,
        message: str | None = None,
        always: bool = False,
    ) -> DecisionRecord | Vote:
        """Decide a pending call as the signed-in ``principal`` (its id is the decider).
        ``always``: also make a standing grant for the rest of the run, where the request's
        rule allows it (``approvals.grants``).

        The approver rules are applied to the request as it stands when it is consumed, in
        the same transaction (an escalation cannot slip between the check and the decision):
        a request ``principal`` may not see is ``RequestNotFound``, exactly like one that does
        not exist; one it may see but not decide is ``NotAllowed``. Edited arguments are
        checked against the run's policy first (``recheck_edit``); ``message`` is a respond
        decision's answer. Otherwise raises as ``approvals.decisions.decide`` does."""
        found = await self._reads.visible_request(request_id, principal)
        # Refused at once when it can be, before an edit's recheck reads the run's state; the
        # same rules run again on the locked row.
        self._rules.check_decide(principal, found)

        def may_decide(current: PendingCall) -> None:
            if not self._rules.may_see(principal, current):
                raise RequestNotFound(current.id)
            self._rules.check_decide(principal, current)

        return await decide(
            self._requests,
            self._decisions,
            found.id,
            verdict,
            principal=principal.id,
            reason=reason,
            args=args,
            recheck=self._edits.recheck_edit,
            message=message,
            check=may_decide,
            read=found,
            require_reason=self._settings.require_reject_reason,
            always=always,
            grants=self._requests,
        )

    async def console_principal(self, text: str, *, deciding: bool = False) -> str:
        """The principal id the operator console's ``--as TEXT`` names
        (``approvals.principals.ConsoleName``): ``NAME`` and ``local:NAME`` are that local
        account, which must exist and be enabled, so that one person is never two principals;
        ``KIND:NAME`` spells any other out. ``deciding``: also refuse a principal that is no
        person (``cli:deploy-bot``), which never decides. Raises ``InvalidValue``."""
        named = console_name(text)
        if named.account is not None:
            account = await self._accounts.user(named.account)
            if account is None:
                raise InvalidValue(
                    "principal",
                    f"{text[:200]!r} names no account: create it (approvals users add), or"
                    " write a principal that is no person as KIND:NAME (e.g. cli:deploy-bot)",
                )
            if account.disabled:
                raise InvalidValue("principal", f"the account {named.account!r} is disabled")
        if deciding and not named.is_person:
            raise InvalidValue(
                "principal",
                f"{text[:200]!r} is no person, and only a person decides: name the account"
                " (or oidc:ISSUER#SUBJECT) the decision is made for",
            )
        return named.principal

    async def decide_as_operator(
        self,
        request_id: str,
        verdict: Ruling | str,
        *,
        principal: str,
        override_by: str | None = None,
        reason: str | None = None,
        args: dict[str, Any] | None = None,
        message: str | None = None,
        always: bool = False,
    ) -> DecisionRecord | Vote:
        """The operator console's decision in ``principal``'s name (``approvals decide --as``).

        Whoever runs the CLI holds the database, so the approver rules do not bind it; the
        decision's audit event records it as an override instead (``override_by``: who
        overrode, ``principal`` when not given), so that ``audit verify`` chains it and a
        reader tells it from a signed-in approver's. Everything else is as ``decide``."""
        return await decide(
            self._requests,
            self._decisions,
            request_id,
            verdict,
            principal=principal,
            reason=reason,
            args=args,
            recheck=self._edits.recheck_edit,
            message=message,
            override_by=override_by or principal,
            require_reason=self._settings.require_reject_reason,
            always=always,
            grants=self._requests,
        )
