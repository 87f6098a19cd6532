"""How the web app answers an error: one JSON shape for the API, one status per kind of error."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from approvals.errors import (
    AccountExists,
    AlreadyVoted,
    ApprovalsError,
    Category,
    EditedArgumentsInvalid,
    EditRefused,
    GraphNotFound,
    InvalidRequestId,
    InvalidRunId,
    InvalidValue,
    NothingToRetry,
    RequestNotPending,
    RunEnded,
    ShownCopyChanged,
    StoredValueUnreadable,
    ThreadBusy,
)


class ErrorDetail(BaseModel):
    code: str
    message: str
    details: list[dict[str, Any]] | None = None


class ErrorBody(BaseModel):
    error: ErrorDetail


#: Documented on every API route: what each status means.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "No valid bearer token"},
    403: {"model": ErrorBody, "description": "You may see this request but not decide it"},
    404: {"model": ErrorBody, "description": "No such request or run, or not one you may see"},
    409: {
        "model": ErrorBody,
        "description": "The request is no longer pending (or the run already ended, or has"
        " nothing to retry)",
    },
    413: {"model": ErrorBody, "description": "The request body is too large"},
    422: {"model": ErrorBody, "description": "Invalid input"},
    503: {"model": ErrorBody, "description": "The database is unavailable; retry later"},
}

#: The HTTP status of each category of error: the one place it is decided.
_STATUS: dict[Category, tuple[int, str]] = {
    Category.INVALID: (422, "invalid_input"),
    Category.NOT_FOUND: (404, "not_found"),
    Category.CONFLICT: (409, "conflict"),
    Category.FORBIDDEN: (403, "forbidden"),
    Category.UNAVAILABLE: (503, "unavailable"),
    Category.FAILURE: (500, "internal"),
}

#: Codes more precise than their category's, first match wins (the status stays the
#: category's): clients branch on them.
_CODES: list[tuple[type[ApprovalsError], str]] = [
    (GraphNotFound, "graph_not_found"),
    (ShownCopyChanged, "shown_copy_changed"),
    (RequestNotPending, "not_pending"),
    (AlreadyVoted, "already_voted"),
    (ThreadBusy, "thread_busy"),
    (RunEnded, "run_ended"),
    (NothingToRetry, "nothing_to_retry"),
    (StoredValueUnreadable, "stored_value_unreadable"),
    (AccountExists, "exists"),
    (EditedArgumentsInvalid, "invalid_arguments"),
    (EditRefused, "edit_refused"),
]


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details

    @classmethod
    def from_error(cls, exc: ApprovalsError) -> ApiError:
        status, code = status_of(exc)
        details = None
        if isinstance(exc, EditedArgumentsInvalid):
            details = [dict(e) for e in exc.errors]
        if isinstance(exc, InvalidValue):
            details = [{"path": exc.field, "message": exc.problem}]
        message = str(exc)
        if isinstance(exc, InvalidRequestId):
            # A malformed id is answered like an unknown one: it names nothing.
            message = "no such request"
        return cls(status, code, message, details)

    def body(self) -> dict[str, Any]:
        detail: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            detail["details"] = self.details
        return {"error": detail}


def status_of(exc: ApprovalsError) -> tuple[int, str]:
    """The status and code the API answers ``exc`` with."""
    if isinstance(exc, InvalidRequestId | InvalidRunId):
        # Invalid input by category, but a malformed id is answered like an unknown one: it
        # names nothing, and a caller cannot tell the ids it may not see from the others.
        return 404, "not_found"
    status, code = _STATUS[exc.category]
    for kind, precise in _CODES:
        if isinstance(exc, kind):
            return status, precise
    return status, code
