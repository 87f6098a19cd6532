"""What a policy is made of: rules, their actions, conditions and transforms."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from datetime import timedelta
from fnmatch import fnmatchcase
from typing import Any

import cel
from agent_hooks import InterceptionPoint

from approvals.grants import Within
from approvals.model import EscalationStep, OnExpiry

#: The points that carry a tool call (``tool``, ``args``; ``result`` after the call).
TOOL_POINTS = frozenset({InterceptionPoint.PRE_TOOL_CALL, InterceptionPoint.POST_TOOL_CALL})
#: The points whose context carries text or structured ``content``.
CONTENT_POINTS = frozenset(
    {InterceptionPoint.INPUT, InterceptionPoint.OUTPUT, InterceptionPoint.POST_MODEL_CALL}
)


class Action(enum.StrEnum):
    """What a matching rule does."""

    ALLOW = "allow"
    WARN = "warn"
    DENY = "deny"
    ESCALATE = "escalate"
    TRANSFORM = "transform"


class DefaultAction(enum.StrEnum):
    """What a policy decides when no rule matches."""

    ALLOW = "allow"
    DENY = "deny"
    ESCALATE = "escalate"


@dataclass(frozen=True, kw_only=True, slots=True)
class Condition:
    """A CEL expression compiled once, at load time."""

    source: str
    program: cel.Program = field(repr=False, compare=False)
    variables: frozenset[str]

    def evaluate(self, activation: dict[str, Any] | cel.Context) -> bool:
        """The condition's value; raises on an evaluation error or a non-boolean result."""
        value = self.program.execute(activation)
        if not isinstance(value, bool):
            raise TypeError(f"condition is {type(value).__name__}, not a boolean")
        return value


@dataclass(frozen=True, kw_only=True, slots=True)
class Mask:
    """Replace every match of ``pattern`` in every string of the target, recursively."""

    pattern: re.Pattern[str]
    replacement: str

    def apply(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.pattern.sub(self.replacement, value)
        if isinstance(value, dict):
            return {k: self.apply(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.apply(v) for v in value]
        return value


@dataclass(frozen=True, kw_only=True, slots=True)
class SetArgument:
    """Set the tool argument at ``path`` (keys and ``[index]`` segments) to ``value``."""

    path: tuple[str | int, ...]
    value: Any

    @property
    def target_path(self) -> str:
        """The AGENT-HOOKS ``$target`` path of the argument."""
        return "$target" + "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in self.path)

    @property
    def spelled(self) -> str:
        """The path as the policy file writes it."""
        return self.target_path.removeprefix("$target.").removeprefix("$target")


@dataclass(frozen=True, kw_only=True, slots=True)
class Rule:
    """One rule of a policy: where it applies, when, and what it does.

    ``line`` is where the rule starts in its file, so tools can point at it.
    """

    id: str
    points: frozenset[InterceptionPoint]
    action: Action
    tool: str | None = None
    #: The rule may name a tool (or a pattern) that the graph it governs does not have; without
    #: it such a rule is refused when the graph is registered (it could never apply).
    tool_may_be_absent: bool = False
    when: Condition | None = None
    priority: int = 0
    reason: str | None = None
    description: str | None = None
    approvers: tuple[str, ...] = ()
    expires_in: timedelta | None = None
    allow_edit: bool = True
    #: Distinct approvers needed (escalate only); any one rejection rejects.
    quorum: int = 1
    #: What happens when the deadline passes (escalate only), and the escalation chain.
    on_expiry: OnExpiry = OnExpiry.REJECT
    then: tuple[EscalationStep, ...] = ()
    #: Argument paths (relative: ``payment.card``) the approver is not shown (escalate only).
    redact: tuple[str, ...] = ()
    #: The decisions approvers may make (escalate only; ``approvals.model.DECISION_TYPES``);
    #: empty means the default (approve, edit, reject: never respond).
    allowed_decisions: tuple[str, ...] = ()
    #: Whether its approver may decide "always" (a standing grant for the rest of the run,
    #: ``approvals.grants``), within these bounds; ``None``: not offered (escalate only).
    allow_always: Within | None = None
    mask: Mask | None = None
    set: SetArgument | None = None
    line: int = 0

    def applies_to(self, point: InterceptionPoint, tool_name: str | None) -> bool:
        """Whether the rule is a candidate at this point for this tool (before its condition)."""
        if point not in self.points:
            return False
        if self.tool is None:
            return True
        return tool_name is not None and fnmatchcase(tool_name, self.tool)

    def message(self) -> str:
        """The text a verdict carries: the rule's ``reason``, else a sentence naming the rule."""
        if self.reason:
            return self.reason
        verbs = {
            Action.ALLOW: "allowed",
            Action.WARN: "flagged",
            Action.DENY: "denied",
            Action.ESCALATE: "sent for approval",
            Action.TRANSFORM: "rewritten",
        }
        return f"{verbs[self.action]} by rule {self.id}"

    def to_json(self) -> dict[str, Any]:
        """The rule as listings show it (the web app, ``approvals policy check --json``)."""
        out: dict[str, Any] = {
            "id": self.id,
            "points": sorted(p.value for p in self.points),
            "action": self.action.value,
            "tool": self.tool,
            "tool_may_be_absent": self.tool_may_be_absent,
            "when": self.when.source if self.when else None,
            "priority": self.priority,
            "reason": self.reason,
            "line": self.line,
        }
        if self.action is Action.ESCALATE:
            out["approvers"] = list(self.approvers)
            out["expires_in_seconds"] = (
                int(self.expires_in.total_seconds()) if self.expires_in else None
            )
            out["allow_edit"] = self.allow_edit
            out["quorum"] = self.quorum
            out["on_expiry"] = self.on_expiry.value
            out["then"] = [step.to_json() for step in self.then]
            out["redact"] = [f"args.{path}" for path in self.redact]
            if self.allowed_decisions:
                out["allowed_decisions"] = list(self.allowed_decisions)
            if self.allow_always is not None:
                out["allow_always"] = {"within": self.allow_always.to_json()}
        if self.mask is not None:
            out["mask"] = {
                "pattern": self.mask.pattern.pattern,
                "replacement": self.mask.replacement,
            }
        if self.set is not None:
            out["set"] = {"path": self.set.spelled, "value": self.set.value}
        return out
