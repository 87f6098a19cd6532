"""The interceptor this core ships: escalate every call of a tool marked sensitive."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent_hooks import Verdict


class EscalateSensitiveTools:
    """At ``pre_tool_call``, a call of a sensitive tool is a liftable deny (escalate)."""

    def __init__(self, sensitive: Iterable[str]) -> None:
        self._sensitive = frozenset(sensitive)

    def intercept(self, context: dict[str, Any], /) -> Verdict:
        if context.get("interception_point") != "pre_tool_call":
            return Verdict.allow()
        name = context.get("tool_call", {}).get("name")
        if name in self._sensitive:
            return Verdict.escalate(
                reason="sensitive_tool", message=f"{name} needs a human decision"
            )
        return Verdict.allow()
