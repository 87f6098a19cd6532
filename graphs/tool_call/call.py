"""A tool's call (``ToolCall``: what a tool knows about the call it executes) and the conditions
that travel with a tool: checked before anyone is asked, and after it ran.

A precondition is an async function ``(args, call) -> bool | str | None`` over the validated
arguments (a dict, as the approver sees them). ``True`` or ``None``: it holds. ``False``: it fails.
A string: it fails, and the string says why. A postcondition also receives the tool's result.

Conditions run again when a paused call resumes (and on edited arguments), so they must not
have side effects. A condition that raises fails: closed, like every check in the engine.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

CheckResult: TypeAlias = bool | str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCall:
    """What a tool knows about the call it executes."""

    run_id: str
    call_id: str
    tool: str
    idempotency_key: str
    principal: str


if TYPE_CHECKING:
    PreCheck: TypeAlias = Callable[[dict[str, Any], ToolCall], Awaitable[CheckResult]]
    PostCheck: TypeAlias = Callable[[dict[str, Any], ToolCall, Any], Awaitable[CheckResult]]


@dataclass(frozen=True, kw_only=True, slots=True)
class Condition:
    """A named rule of a tool; ``check`` is a ``PreCheck`` or a ``PostCheck``."""

    name: str
    description: str
    check: Callable[..., Awaitable[CheckResult]]

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "description": self.description}


@dataclass(frozen=True, kw_only=True, slots=True)
class ConditionFailed:
    """Which rule failed and why; what the model (and the audit log) is told."""

    condition: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"condition": self.condition, "message": self.message}


def _condition(fn: Callable[..., Awaitable[CheckResult]], name: str | None) -> Condition:
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"{fn.__name__}: a condition must be an async function")
    return Condition(
        name=name or fn.__name__,
        description=inspect.getdoc(fn) or (name or fn.__name__),
        check=fn,
    )


def precondition(name: str | None = None) -> Callable[[PreCheck], Condition]:
    """Declare a precondition from ``async def rule(args, call) -> bool | str | None``; its
    docstring is the rule as people read it."""
    return lambda fn: _condition(fn, name)


def postcondition(name: str | None = None) -> Callable[[PostCheck], Condition]:
    """Declare a postcondition from ``async def rule(args, call, result) -> bool | str | None``."""
    return lambda fn: _condition(fn, name)


async def first_failure(conditions: Sequence[Condition], *params: Any) -> ConditionFailed | None:
    """Check conditions in order; the first that does not hold, or ``None``."""
    for condition in conditions:
        try:
            verdict = await condition.check(*params)
        except Exception as exc:  # a check that cannot decide fails closed
            return ConditionFailed(
                condition=condition.name, message=f"check failed: {type(exc).__name__}: {exc}"
            )
        if verdict is True or verdict is None:
            continue
        message = verdict if isinstance(verdict, str) else condition.description
        return ConditionFailed(condition=condition.name, message=message)
    return None
