"""The LangGraph side of the engine. ``from graphs import ApprovalMiddleware`` gives the
``create_agent`` middleware, ``GovernedToolNode`` the governed ``ToolNode``. They are imported
on first use: importing langchain takes seconds, and most commands that import this package
never need it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphs.middleware import ApprovalMiddleware, GovernedToolNode

__all__ = ["ApprovalMiddleware", "GovernedToolNode"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from graphs import middleware

        return getattr(middleware, name)
    raise AttributeError(f"module 'graphs' has no attribute {name!r}")
