"""The LangGraph side of the engine. ``from graphs import ApprovalMiddleware`` gives the
``create_agent`` middleware; it is imported on first use, because importing langchain takes
seconds and most commands that import this package never need it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphs.middleware import ApprovalMiddleware

__all__ = ["ApprovalMiddleware"]


def __getattr__(name: str) -> Any:
    if name == "ApprovalMiddleware":
        from graphs.middleware import ApprovalMiddleware

        return ApprovalMiddleware
    raise AttributeError(f"module 'graphs' has no attribute {name!r}")
