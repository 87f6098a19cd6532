"""The engine's error hierarchy: one base, subclasses carry the ids they are about.

The CLI and the web app map these to exit codes and HTTP statuses in one place each.
"""

from __future__ import annotations

from typing import Any


class ApprovalsError(Exception):
    """Base of every error the engine raises on purpose."""


class ConfigurationError(ApprovalsError):
    """The engine is configured in a way it cannot run with."""


class InvalidRequestId(ApprovalsError):
    """A request id that the engine could never have issued (malformed or forged)."""

    def __init__(self, value: str) -> None:
        self.value = value
        super().__init__(f"not a valid request id: {value[:80]!r}")


class RequestNotFound(ApprovalsError):
    """A well-formed request id that names no request."""

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        super().__init__(f"approval request {request_id} does not exist")


class RequestNotPending(ApprovalsError):
    """The request exists but can no longer be decided (decided, expired, superseded)."""

    def __init__(self, request_id: str, status: str) -> None:
        self.request_id = request_id
        self.status = status
        super().__init__(f"approval request {request_id} is no longer pending (status: {status})")


class InvalidDecision(ApprovalsError):
    """A decision that is malformed: unknown verdict, missing reason, args on a reject."""

    def __init__(self, request_id: str, detail: str) -> None:
        self.request_id = request_id
        self.detail = detail
        super().__init__(f"invalid decision for request {request_id}: {detail}")


class EditedArgumentsInvalid(ApprovalsError):
    """Arguments edited by an approver fail the tool's schema."""

    def __init__(self, request_id: str, errors: list[dict[str, Any]]) -> None:
        self.request_id = request_id
        self.errors = errors
        first = errors[0]["message"] if errors else "invalid"
        super().__init__(f"edited arguments for request {request_id} are invalid: {first}")


class InvalidRunId(ApprovalsError):
    """A run id that the engine could never have issued."""

    def __init__(self, value: str) -> None:
        self.value = value
        super().__init__(f"not a valid run id: {value[:80]!r}")


class RunNotFound(ApprovalsError):
    """A run id that names no run."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id} does not exist")


class GraphNotFound(ApprovalsError):
    """A graph name that the registry does not know."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        super().__init__(f"unknown graph {name!r}; registered graphs: {', '.join(known) or 'none'}")


class GraphLoadError(ApprovalsError):
    """A registry entry that cannot be imported or does not build a graph."""

    def __init__(self, name: str, target: str, detail: str) -> None:
        self.name = name
        self.target = target
        super().__init__(f"graph {name!r} ({target}) cannot be loaded: {detail}")


class InvalidRunInput(ApprovalsError):
    """Input for a run that the graph cannot accept."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(f"invalid run input: {detail}")


class ThreadBusy(ApprovalsError):
    """A thread whose earlier run still waits for decisions cannot take new input."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(f"thread {thread_id!r} has a run waiting for decisions; decide it first")


class DatabaseUnavailable(ApprovalsError):
    """The database cannot be reached or refused the connection."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(f"database unavailable: {detail}")


class AccountExists(ApprovalsError):
    """A local account or API token of that name already exists."""

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(f"a {kind} named {name!r} already exists")


class InvalidAccount(ApprovalsError):
    """A name, password or group list that cannot make an account or token."""


class NotAllowed(ApprovalsError):
    """The principal may see this request but not decide it (separation of duties, or not in
    the approver groups that may decide it)."""

    def __init__(self, request_id: str, why: str) -> None:
        self.request_id = request_id
        self.why = why
        super().__init__(f"you may not decide request {request_id}: {why}")


class AlreadyVoted(ApprovalsError):
    """This principal already approved a request that needs more approvers."""

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        super().__init__(f"you already approved request {request_id}; it waits for other approvers")


class RunEnded(ApprovalsError):
    """The run is over (completed, blocked, failed or cancelled): it cannot be cancelled."""

    def __init__(self, run_id: str, status: str) -> None:
        self.run_id = run_id
        self.status = status
        super().__init__(f"run {run_id} already ended (status: {status})")
