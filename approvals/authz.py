"""Who may see and who may decide an approval request.

- A request names the approver groups that may decide it (from the policy that escalated it);
  a request that names none falls to the default approver group.
- Operators see every request; seeing is not deciding.
- Separation of duties: whoever started the run cannot decide its calls.
- The rules count people, not principals: a token acts for the account that owns it, so
  alice's token and alice's web account are one person. A service token (no owner) may start
  runs but never decide.

A request a principal may not see must look exactly like one that does not exist (the web app
answers 404 for both); one it may see but not decide is refused with the reason (403).
"""

from __future__ import annotations

from dataclasses import dataclass

from approvals.errors import NotAllowed
from approvals.model import PendingCall, Run
from approvals.principals import Principal


@dataclass(frozen=True, kw_only=True, slots=True)
class ApproverRules:
    default_group: str = "approvers"
    operator_group: str = "operators"

    def deciders(self, request: PendingCall) -> frozenset[str]:
        """The groups whose members may decide ``request``."""
        return frozenset(request.approvers) or frozenset({self.default_group})

    def is_operator(self, principal: Principal) -> bool:
        return self.operator_group in principal.groups

    def may_see(self, principal: Principal, request: PendingCall) -> bool:
        return bool(principal.groups & self.deciders(request)) or self.is_operator(principal)

    def check_decide(self, principal: Principal, request: PendingCall) -> None:
        """Raises ``NotAllowed`` unless ``principal`` may decide ``request`` (call it only for
        a request the principal may see)."""
        if principal.person is None:
            raise NotAllowed(
                request.id,
                f"{principal.id} is a service token (it has no owner): it may start runs but"
                " never decide; decide with a token that belongs to your account"
                " (approvals tokens create NAME --owner USER) or in the web app",
            )
        if request.requested_by == principal.id or (
            request.requested_by_person is not None
            and request.requested_by_person == principal.person
        ):
            raise NotAllowed(request.id, "you started this run (separation of duties)")
        if request.proposed_by is not None and request.proposed_by in (
            principal.id,
            principal.person,
        ):
            # The edit needed other or more approvers: it never runs on the editor's word.
            raise NotAllowed(request.id, "you edited these arguments; another approver decides")
        if not principal.groups & self.deciders(request):
            groups = ", ".join(sorted(self.deciders(request)))
            raise NotAllowed(request.id, f"only members of {groups} may decide it")

    def may_decide(self, principal: Principal, request: PendingCall) -> bool:
        try:
            self.check_decide(principal, request)
        except NotAllowed:
            return False
        return True

    def may_see_run(self, principal: Principal, run: Run, requests: list[PendingCall]) -> bool:
        """The run's starter, operators, and whoever may see one of its requests."""
        return self.may_read_run(principal, run) or any(
            self.may_see(principal, r) for r in requests
        )

    def may_read_run(self, principal: Principal, run: Run) -> bool:
        """Whether ``principal`` may read what the run says: the model's messages, its answer,
        its error and its tools' errors, any of which may quote an argument a policy redacts
        from approvers. The run's starter and operators; an approver sees the run only
        through its requests."""
        return self.started(principal, run) or self.is_operator(principal)

    def started(self, principal: Principal, run: Run) -> bool:
        """Whether ``principal`` started ``run``, through this or another of its person's
        principals (a token and its owner's web account are one starter), as separation of
        duties counts it."""
        return run.started_by == principal.id or (
            principal.person is not None and run.started_by_person == principal.person
        )
