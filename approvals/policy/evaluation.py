"""A loaded policy as an AGENT-HOOKS-0.1 interceptor: context in, verdict out.

Rules run by priority (highest first), ties in file order. ``warn`` rules add a warning and
evaluation goes on; the first matching allow, deny, escalate or transform rule decides; no
match falls to the policy's default. An error while evaluating a candidate rule's condition
denies (fail closed): a policy that cannot be evaluated must not let a call through.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar

import cel
from agent_hooks import Decision, InterceptionPoint, Transform, Verdict, Warning

from approvals.decision_kinds import DECISION_TYPES
from approvals.grants import Within
from approvals.model import EscalationStep, OnExpiry
from approvals.policy.rules import TOOL_POINTS, Action, DefaultAction, Rule, SetArgument

#: The variables a condition may use; see docs/policies.md.
VARIABLES = frozenset({"point", "principal", "tool", "args", "result", "content", "run"})
#: ``context["extensions"][EXTENSION]`` is where the host puts what policies know about the run.
EXTENSION = "approvals"
#: The verdict reason of a rule that could not be evaluated.
POLICY_ERROR = "policy_error"
#: The verdict reason (and approval ``rule``) when no rule matched and the default decided.
DEFAULT_RULE = "default"
#: The tool metadata a condition sees as ``tool.<key>`` (null when the tool does not say).
TOOL_METADATA = ("sensitive", "risk", "estimated_cost", "approver_group")


def approvals_extension(
    *,
    tool: Mapping[str, Any] | None = None,
    tool_name: str | None = None,
    run_id: str | None = None,
    graph: str | None = None,
    tool_counts: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The ``extensions.approvals`` block a host adds to a context for policies to read.

    ``tool`` is the called tool's metadata (``sensitive``, ``risk``, ``estimated_cost``,
    ``approver_group``); ``tool_counts`` how many times each tool already ran in this run, and
    ``tool_count`` (set when ``tool_name`` is given) the called tool's own count.
    """
    out: dict[str, Any] = {}
    if run_id is not None:
        out["run_id"] = run_id
    if graph is not None:
        out["graph"] = graph
    if tool is not None:
        out["tool"] = {k: tool.get(k) for k in TOOL_METADATA}
    if tool_counts is not None:
        out["tool_counts"] = dict(tool_counts)
        if tool_name is not None:
            out["tool_count"] = tool_counts.get(tool_name, 0)
    return out


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def activation_of(context: Mapping[str, Any]) -> dict[str, Any]:
    """The CEL variables for one context (documented in docs/policies.md)."""
    point = str(context.get("interception_point", ""))
    extension = _mapping(_mapping(context.get("extensions")).get(EXTENSION))
    tool_call = _mapping(context.get("tool_call"))
    at_tool = point in {p.value for p in TOOL_POINTS}
    name = tool_call.get("name") if at_tool else None
    tool: dict[str, Any] = {}
    if isinstance(name, str):
        metadata = _mapping(extension.get("tool"))
        tool = {"name": name, **{key: metadata.get(key) for key in TOOL_METADATA}}
        tool["sensitive"] = metadata.get("sensitive") is True
    content: Any = None
    if point == InterceptionPoint.INPUT.value:
        content = _mapping(context.get("input")).get("content")
    elif point == InterceptionPoint.OUTPUT.value:
        content = _mapping(context.get("output")).get("content")
    elif point == InterceptionPoint.POST_MODEL_CALL.value:
        content = _mapping(context.get("response")).get("content")
    counts = {
        k: v
        for k, v in _mapping(extension.get("tool_counts")).items()
        if isinstance(v, int) and not isinstance(v, bool)
    }
    count = extension.get("tool_count")
    if not isinstance(count, int) or isinstance(count, bool):
        count = counts.get(name, 0) if isinstance(name, str) else 0
    run_id = extension.get("run_id") or _mapping(context.get("session")).get("id") or ""
    graph = extension.get("graph") or _mapping(context.get("agent")).get("id") or ""
    return {
        "point": point,
        "principal": str(_mapping(context.get("actor")).get("id") or ""),
        "tool": tool,
        "args": _mapping(tool_call.get("args")) if at_tool else {},
        "result": (
            _mapping(context.get("tool_result")).get("value")
            if point == InterceptionPoint.POST_TOOL_CALL.value
            else None
        ),
        "content": content,
        "run": {
            "id": str(run_id),
            "graph": str(graph),
            "tool_count": count if isinstance(name, str) else 0,
            "tool_counts": counts,
        },
    }


def _short(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"no such key: {exc.args[0]!r}" if exc.args else "no such key"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    # CEL's overload errors go on with advice; the first sentence is the error.
    text = text.split(". ", 1)[0]
    return text[:200]


@dataclass(frozen=True, kw_only=True, slots=True)
class Escalation:
    """The approval parameters an escalating verdict carries."""

    rule: str
    approvers: tuple[str, ...] = ()
    expires_in: timedelta | None = None
    allow_edit: bool = True
    quorum: int = 1
    #: What happens when the deadline passes; with ``escalate``, ``then`` is the chain.
    on_expiry: OnExpiry = OnExpiry.REJECT
    then: tuple[EscalationStep, ...] = ()
    #: Argument paths (relative: ``payment.card``) redacted from what the approver is shown.
    redact: tuple[str, ...] = ()
    #: The decisions approvers may make; empty: the default (approve, edit, reject).
    allowed_decisions: tuple[str, ...] = ()
    #: Whether its approver may decide "always", within these bounds (``approvals.grants``).
    allow_always: Within | None = None


def escalation_of(verdict: Verdict) -> Escalation | None:
    """The escalation a verdict asks for, or ``None`` if it is not a liftable deny.

    A liftable deny from another interceptor (an empty ``approval`` block) yields an
    escalation named after its reason, with no approvers, no expiry and edits allowed. An
    escalation chain is taken only whole and well formed (else the request is rejected when
    it expires, the fail-closed default).
    """
    if verdict.decision is not Decision.DENY or verdict.approval is None:
        return None
    block = verdict.approval
    rule = block.get("rule")
    approvers = block.get("approvers")
    seconds = block.get("expires_in_seconds")
    allow_edit = block.get("allow_edit")
    quorum = block.get("quorum")
    chain = block.get("then")
    items = chain if isinstance(chain, list) else []
    steps = tuple(s for item in items if (s := EscalationStep.from_json(item)) is not None)
    escalates = block.get("on_expiry") == OnExpiry.ESCALATE and 0 < len(steps) == len(items)
    redact = block.get("redact")
    allowed = block.get("allowed_decisions")
    return Escalation(
        rule=rule if isinstance(rule, str) else (verdict.reason or ""),
        approvers=(
            tuple(a for a in approvers if isinstance(a, str)) if isinstance(approvers, list) else ()
        ),
        expires_in=(
            timedelta(seconds=seconds)
            if isinstance(seconds, int) and not isinstance(seconds, bool) and seconds > 0
            else None
        ),
        allow_edit=allow_edit if isinstance(allow_edit, bool) else True,
        quorum=quorum if isinstance(quorum, int) and not isinstance(quorum, bool) else 1,
        on_expiry=OnExpiry.ESCALATE if escalates else OnExpiry.REJECT,
        then=steps if escalates else (),
        redact=(tuple(p for p in redact if isinstance(p, str)) if isinstance(redact, list) else ()),
        allowed_decisions=(
            tuple(d for d in DECISION_TYPES if d in allowed) if isinstance(allowed, list) else ()
        ),
        allow_always=_always(block.get("allow_always")),
    )


def _always(value: Any) -> Within | None:
    """The bounds of an approval block's ``allow_always`` (``None``: not offered, or
    malformed: fail closed)."""
    return Within.from_json(value.get("within", {})) if isinstance(value, dict) else None


def _approval_block(escalation: Escalation) -> dict[str, Any]:
    block: dict[str, Any] = {
        "rule": escalation.rule,
        "approvers": list(escalation.approvers),
        "expires_in_seconds": (
            int(escalation.expires_in.total_seconds()) if escalation.expires_in else None
        ),
        "allow_edit": escalation.allow_edit,
        "quorum": escalation.quorum,
    }
    if escalation.on_expiry is OnExpiry.ESCALATE:
        # Only when asked for: the default (reject) keeps the block as it always was.
        block["on_expiry"] = escalation.on_expiry.value
        block["then"] = [step.to_json() for step in escalation.then]
    if escalation.redact:
        # What the host must not show the approver (see approvals.redaction).
        block["redact"] = list(escalation.redact)
    if escalation.allowed_decisions:
        # Only when the rule names them: the host's default stays approve, edit and reject.
        block["allowed_decisions"] = list(escalation.allowed_decisions)
    if escalation.allow_always is not None:
        # Only when the rule offers it: the approver may decide "always" (approvals.grants).
        block["allow_always"] = {"within": escalation.allow_always.to_json()}
    return block


class _NoChange(Exception):
    """A transform that would leave the target as it is: the rule does not match."""


def _set_transform(target: Any, change: SetArgument) -> Transform:
    """The transform for a ``set`` rule: the argument's own path when it exists (the record
    says exactly what changed), else the whole target with the argument added (a
    ``$target`` path can only replace what is there)."""
    if not isinstance(target, dict):
        raise TypeError("the target is not a mapping of arguments")
    updated = copy.deepcopy(target)
    node: Any = updated
    *parents, last = change.path
    existed = True
    for segment in parents:
        if isinstance(segment, int):
            node = node[segment]
        else:
            if not isinstance(node, dict):
                raise TypeError(f"cannot set {change.spelled}: {segment!r} is not in a mapping")
            if segment not in node:
                existed = False
                node[segment] = {}
            node = node[segment]
    if isinstance(last, int):
        if not isinstance(node, list) or last >= len(node):
            raise KeyError(last)
        current = node[last]
    else:
        if not isinstance(node, dict):
            raise TypeError(f"cannot set {change.spelled}: its parent is not a mapping")
        existed = existed and last in node
        current = node.get(last)
    if existed and current == change.value and type(current) is type(change.value):
        raise _NoChange
    node[last] = copy.deepcopy(change.value)
    if existed:
        return Transform(path=change.target_path, value=copy.deepcopy(change.value))
    return Transform(path="$target", value=updated)


class Policy:
    """A loaded, checked policy; an AGENT-HOOKS-0.1 interceptor (``intercept(context)``).

    ``points`` are the interception points the policy governs: register it there. At any
    other point it allows without looking (its default applies only where it governs).
    """

    #: It never mutates nor keeps the context it reads (a transform is built on a copy of the
    #: target), so a host emitter may hand it the context itself instead of a copy
    #: (``graphs.hooks.emitter``).
    context_read_only: ClassVar[bool] = True

    def __init__(
        self,
        *,
        name: str,
        default: DefaultAction,
        rules: tuple[Rule, ...],
        points: frozenset[InterceptionPoint],
        version: int = 1,
        description: str | None = None,
        source: str = "<policy>",
    ) -> None:
        self.name = name
        self.version = version
        self.description = description
        self.default = default
        self.rules = rules
        self.points = points
        self.source = source
        # Stable sort: equal priorities keep file order.
        self._ordered = tuple(sorted(rules, key=lambda r: -r.priority))
        self._point_values = {p.value: p for p in points}

    def __repr__(self) -> str:
        return f"Policy(name={self.name!r}, rules={len(self.rules)}, default={self.default})"

    def intercept(self, context: dict[str, Any], /) -> Verdict:
        """The verdict of this policy for one context (never raises for a bad context)."""
        point = self._point_values.get(str(context.get("interception_point")))
        if point is None:
            return Verdict.allow()
        tool_call = context.get("tool_call")
        name = tool_call.get("name") if isinstance(tool_call, dict) else None
        tool_name = name if isinstance(name, str) and point in TOOL_POINTS else None
        # Converted to CEL once per context, shared by every condition evaluated for it.
        activation: cel.Context | None = None
        warnings: list[Warning] = []
        for rule in self._ordered:
            if not rule.applies_to(point, tool_name):
                continue
            try:
                if rule.when is not None:
                    if activation is None:
                        activation = cel.Context(variables=activation_of(context))
                    if not rule.when.evaluate(activation):
                        continue
                verdict = self._decide(rule, context, tuple(warnings))
            except _NoChange:
                continue
            except Exception as exc:  # fail closed: any evaluation error denies, named
                return Verdict.deny(reason=POLICY_ERROR, message=f"rule {rule.id}: {_short(exc)}")
            if verdict is None:
                warnings.append(Warning(reason=rule.id, message=rule.message()))
                continue
            return verdict
        return self._default(tuple(warnings))

    def _decide(
        self, rule: Rule, context: dict[str, Any], warnings: tuple[Warning, ...]
    ) -> Verdict | None:
        """The verdict of a matching rule, or ``None`` for a warning."""
        if rule.action is Action.WARN:
            return None
        message = rule.message()
        if rule.action is Action.ALLOW:
            return Verdict(
                decision=Decision.ALLOW, reason=rule.id, message=message, warnings=warnings
            )
        if rule.action is Action.DENY:
            return Verdict(
                decision=Decision.DENY, reason=rule.id, message=message, warnings=warnings
            )
        if rule.action is Action.ESCALATE:
            escalation = Escalation(
                rule=rule.id,
                approvers=rule.approvers,
                expires_in=rule.expires_in,
                allow_edit=rule.allow_edit,
                quorum=rule.quorum,
                on_expiry=rule.on_expiry,
                then=rule.then,
                redact=rule.redact,
                allowed_decisions=rule.allowed_decisions,
                allow_always=rule.allow_always,
            )
            return Verdict(
                decision=Decision.DENY,
                reason=rule.id,
                message=message,
                warnings=warnings,
                approval=_approval_block(escalation),
            )
        target = context.get("target")
        if rule.mask is not None:
            masked = rule.mask.apply(target)
            if masked == target:
                raise _NoChange
            transform = Transform(path="$target", value=masked)
        else:
            assert rule.set is not None  # the loader guarantees one of mask / set
            transform = _set_transform(target, rule.set)
        return Verdict(
            decision=Decision.TRANSFORM,
            reason=rule.id,
            message=message,
            warnings=warnings,
            transform=transform,
        )

    def _default(self, warnings: tuple[Warning, ...]) -> Verdict:
        if self.default is DefaultAction.ALLOW:
            return Verdict(decision=Decision.ALLOW, warnings=warnings) if warnings else ALLOWED
        message = f"no rule of policy {self.name} allows this"
        approval = None
        if self.default is DefaultAction.ESCALATE:
            approval = _approval_block(Escalation(rule=DEFAULT_RULE))
            message = f"no rule of policy {self.name} decides this: a human must"
        return Verdict(
            decision=Decision.DENY,
            reason=DEFAULT_RULE,
            message=message,
            warnings=warnings,
            approval=approval,
        )


ALLOWED = Verdict.allow()
