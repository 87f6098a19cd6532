"""The engine's error hierarchy: one base, subclasses carry the ids they are about.

Each error has a ``category`` (what kind of refusal it is); the web app derives its HTTP
status from it in ``web.errors`` and the CLI its exit code in ``web.cli.command``, one place
each.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar


class Category(enum.StrEnum):
    """What kind of refusal an error is, whatever face reports it."""

    #: The input can never succeed as given (malformed, out of bounds, refused by a rule).
    INVALID = "invalid"
    #: It names nothing (or nothing the caller may see).
    NOT_FOUND = "not_found"
    #: It was valid, but the state it meets no longer allows it (decided, ended, taken).
    CONFLICT = "conflict"
    #: The caller may see it but not do this.
    FORBIDDEN = "forbidden"
    #: Something it needs (the database) cannot be reached; retry later.
    UNAVAILABLE = "unavailable"
    #: The engine itself cannot do it as configured or as stored (a broken graph, a forged
    #: anchor): an operator's matter, not the caller's.
    FAILURE = "failure"


class ApprovalsError(Exception):
    """Base of every error the engine raises on purpose."""

    category: ClassVar[Category] = Category.FAILURE


class ConfigurationError(ApprovalsError):
    """The engine is configured in a way it cannot run with."""

    category = Category.FAILURE


class InvalidRequestId(ApprovalsError):
    """A request id that the engine could never have issued (malformed or forged)."""

    category = Category.INVALID

    def __init__(self, value: str) -> None:
        self.value = value
        super().__init__(f"not a valid request id: {value[:80]!r}")


class RequestNotFound(ApprovalsError):
    """A well-formed request id that names no request."""

    category = Category.NOT_FOUND

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        super().__init__(f"approval request {request_id} does not exist")


class RequestNotPending(ApprovalsError):
    """The request exists but can no longer be decided (decided, expired, superseded)."""

    category = Category.CONFLICT

    def __init__(self, request_id: str, status: str) -> None:
        self.request_id = request_id
        self.status = status
        super().__init__(f"approval request {request_id} is no longer pending (status: {status})")


class InvalidDecision(ApprovalsError):
    """A decision that is malformed: unknown verdict, missing reason, args on a reject."""

    category = Category.INVALID

    def __init__(self, request_id: str, detail: str) -> None:
        self.request_id = request_id
        self.detail = detail
        super().__init__(f"invalid decision for request {request_id}: {detail}")


class EditRefused(InvalidDecision):
    """The policy refuses the arguments an approver edited (a deny rule matches them, or a
    transform would rewrite them): the edit is not taken and the request stays pending."""

    def __init__(self, request_id: str, rule: str | None, message: str) -> None:
        self.rule = rule
        named = f"rule {rule}: {message}" if rule else message
        super().__init__(request_id, f"the policy refuses the edited arguments ({named})")


class ShownCopyChanged(RequestNotPending):
    """What the request would show no longer matches the digest recorded with it: the row was
    changed behind the engine's back. It is neither shown nor decided."""

    def __init__(self, request_id: str) -> None:
        super().__init__(request_id, "tampered")
        self.args = (
            f"approval request {request_id} was changed after it was recorded: what it shows "
            "no longer matches its digest, so it cannot be shown or decided",
        )


class EditedArgumentsInvalid(ApprovalsError):
    """Arguments edited by an approver fail the tool's schema."""

    category = Category.INVALID

    def __init__(self, request_id: str, errors: list[dict[str, Any]]) -> None:
        self.request_id = request_id
        self.errors = errors
        first = errors[0]["message"] if errors else "invalid"
        super().__init__(f"edited arguments for request {request_id} are invalid: {first}")


class InvalidRunId(ApprovalsError):
    """A run id that the engine could never have issued."""

    category = Category.INVALID

    def __init__(self, value: str) -> None:
        self.value = value
        super().__init__(f"not a valid run id: {value[:80]!r}")


class RunNotFound(ApprovalsError):
    """A run id that names no run."""

    category = Category.NOT_FOUND

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id} does not exist")


class RunPruned(RunNotFound):
    """A run that retention pruned: its records are deleted; its audit events remain."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id)
        self.args = (
            f"run {run_id} was pruned by retention (`approvals retention prune`): its records"
            f" are deleted; its audit events remain (`approvals audit export --run {run_id}`)",
        )


class GraphNotFound(ApprovalsError):
    """A graph name that the registry does not know."""

    category = Category.NOT_FOUND

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        super().__init__(f"unknown graph {name!r}; registered graphs: {', '.join(known) or 'none'}")


class GraphLoadError(ApprovalsError):
    """A registry entry that cannot be imported or does not build a graph."""

    category = Category.FAILURE

    def __init__(self, name: str, target: str, detail: str) -> None:
        self.name = name
        self.target = target
        super().__init__(f"graph {name!r} ({target}) cannot be loaded: {detail}")


class InvalidRunInput(ApprovalsError):
    """Input for a run that the graph cannot accept."""

    category = Category.INVALID

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(f"invalid run input: {detail}")


class InvalidValue(ApprovalsError):
    """A value the engine cannot store, hash or show faithfully: text with a NUL or a lone
    surrogate, NaN or Infinity, an integer beyond 2^53 - 1, something that is not JSON, or
    nesting too deep (the rules are in ``approvals.json_values``)."""

    category = Category.INVALID

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field} {problem}")


class InvalidCursor(ApprovalsError):
    """A page cursor the engine did not issue for this listing (garbage, forged, or taken
    from a listing with other filters or another order)."""

    category = Category.INVALID

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(f"not a valid cursor: {detail}")


class ThreadBusy(ApprovalsError):
    """A thread whose earlier run still waits for decisions cannot take new input."""

    category = Category.CONFLICT

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(f"thread {thread_id!r} has a run waiting for decisions; decide it first")


class DatabaseUnavailable(ApprovalsError):
    """The database cannot be reached or refused the connection."""

    category = Category.UNAVAILABLE

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(f"database unavailable: {detail}")


class StartsBusy(ApprovalsError):
    """The process already starts as many runs as its pool serves, and no place came free in
    time: this run was not started, and nothing of it was written. Retry after
    ``retry_after`` seconds."""

    category = Category.UNAVAILABLE

    def __init__(self, waited: float, retry_after: int) -> None:
        self.waited = waited
        self.retry_after = retry_after
        super().__init__(
            f"too many runs are starting at once: waited {waited:g} s for a place and started"
            f" nothing (retry in {retry_after} s)"
        )


class AccountExists(ApprovalsError):
    """A local account or API token of that name already exists."""

    category = Category.CONFLICT

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(f"a {kind} named {name!r} already exists")


class InvalidAccount(ApprovalsError):
    """A name, password or group list that cannot make an account or token."""

    category = Category.INVALID


class NotAllowed(ApprovalsError):
    """The principal may see this request but not decide it (separation of duties, or not in
    the approver groups that may decide it)."""

    category = Category.FORBIDDEN

    def __init__(self, request_id: str, why: str) -> None:
        self.request_id = request_id
        self.why = why
        super().__init__(f"you may not decide request {request_id}: {why}")


class RunNotAllowed(ApprovalsError):
    """The principal may see this run (or thread) but not act on it: only the run's starter or
    an operator may cancel it, or add to its thread."""

    category = Category.FORBIDDEN

    def __init__(self, subject: str, why: str) -> None:
        self.subject = subject
        self.why = why
        super().__init__(why)


class AlreadyVoted(ApprovalsError):
    """This person already approved a request that needs more approvers (through this principal
    or another of theirs: a person's token and web account are one approver)."""

    category = Category.CONFLICT

    def __init__(self, request_id: str, earlier: str | None = None) -> None:
        self.request_id = request_id
        self.earlier = earlier
        as_whom = f" (as {earlier})" if earlier else ""
        super().__init__(
            f"you already approved request {request_id}{as_whom}; one person is one approver,"
            " so it waits for other approvers"
        )


class RunEnded(ApprovalsError):
    """The run is over (completed, blocked, failed or cancelled): it cannot be cancelled."""

    category = Category.CONFLICT

    def __init__(self, run_id: str, status: str) -> None:
        self.run_id = run_id
        self.status = status
        super().__init__(f"run {run_id} already ended (status: {status})")


class NothingToRetry(ApprovalsError):
    """A run's failed resumes can be queued again only while the run waits, and only when one
    of them failed: ``status`` is the run's status when it was asked."""

    category = Category.CONFLICT

    def __init__(self, run_id: str, status: str) -> None:
        self.run_id = run_id
        self.status = status
        why = "no resume of it failed" if status == "waiting" else f"it is {status}, not waiting"
        super().__init__(f"nothing to retry for run {run_id}: {why}")


class StoredValueUnreadable(ApprovalsError):
    """A json/jsonb value read from the database is nested deeper than it can be read back
    (``json.loads`` runs out of recursion; orjson stops at 255 levels). The engine never
    writes one (``check_json`` caps the depth), so it was written behind the engine's back:
    an operator's matter (``approvals audit verify`` names a rewritten log event)."""

    category = Category.FAILURE

    def __init__(self, size: int) -> None:
        super().__init__(
            f"a JSON value stored in the database ({size} bytes) cannot be read back (nested"
            " too deeply, or a number of too many digits); the engine never writes one, so it"
            " was changed outside the engine"
        )
        self.size = size


class RuntimeRoleRefused(ApprovalsError):
    """A role that ``approvals db grant`` will not make the runtime role: it does not exist,
    or it could alter, disable or drop what it would be given (an owner, a member of one, a
    superuser)."""

    category = Category.INVALID

    def __init__(self, role: str, reason: str) -> None:
        self.role = role
        self.reason = reason
        super().__init__(reason)


class AnchorInvalid(ApprovalsError):
    """An audit anchor this engine did not write as it stands: forged, edited, reordered, or
    signed with another key."""

    category = Category.FAILURE

    def __init__(self, source: str, line: int, reason: str) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        super().__init__(f"anchor {source}:{line} is not valid: {reason}")
