"""How the web app answers an error: one JSON shape for the API, one status per kind of error."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from approvals.errors import (
    AccountExists,
    AlreadyVoted,
    ApprovalsError,
    DatabaseUnavailable,
    EditedArgumentsInvalid,
    EditRefused,
    GraphNotFound,
    InvalidAccount,
    InvalidDecision,
    InvalidRequestId,
    InvalidRunId,
    InvalidRunInput,
    InvalidValue,
    NotAllowed,
    RequestNotFound,
    RequestNotPending,
    RunEnded,
    RunNotFound,
    ShownCopyChanged,
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
        "description": "The request is no longer pending (or the run already ended)",
    },
    413: {"model": ErrorBody, "description": "The request body is too large"},
    422: {"model": ErrorBody, "description": "Invalid input"},
    503: {"model": ErrorBody, "description": "The database is unavailable; retry later"},
}

_STATUS: list[tuple[type[ApprovalsError] | tuple[type[ApprovalsError], ...], int, str]] = [
    ((RequestNotFound, RunNotFound, InvalidRequestId, InvalidRunId), 404, "not_found"),
    (GraphNotFound, 404, "graph_not_found"),
    (NotAllowed, 403, "forbidden"),
    (ShownCopyChanged, 409, "shown_copy_changed"),
    (RequestNotPending, 409, "not_pending"),
    (AlreadyVoted, 409, "already_voted"),
    (ThreadBusy, 409, "thread_busy"),
    (RunEnded, 409, "run_ended"),
    (AccountExists, 409, "exists"),
    (EditedArgumentsInvalid, 422, "invalid_arguments"),
    (EditRefused, 422, "edit_refused"),
    ((InvalidDecision, InvalidRunInput, InvalidAccount, InvalidValue), 422, "invalid_input"),
    (DatabaseUnavailable, 503, "unavailable"),
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
    for kinds, status, code in _STATUS:
        if isinstance(exc, kinds):
            return status, code
    return 500, "internal"
