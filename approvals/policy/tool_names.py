"""Whether a policy's rules name tools that the graph it governs has.

A rule whose ``tool`` matches none of the graph's tools can never apply. Under ``default:
allow`` a typo there (``delete_customr`` for ``delete_customer``) would silently let through
every call the rule was written to stop, so such a rule is refused when the graph is registered
(and by ``approvals policy check --graph``), with its line and the nearest tool names. A rule
that is meant to outlive a tool, or is shared by graphs that do not all have it, says
``tool_may_be_absent: true``.
"""

from __future__ import annotations

from collections.abc import Iterable
from difflib import get_close_matches
from fnmatch import fnmatchcase

from agent_hooks import InterceptionPoint

from approvals.policy.evaluation import Policy
from approvals.policy.rules import Rule
from approvals.policy.source import PolicyError

#: The characters that make a rule's ``tool`` an fnmatch pattern rather than a name.
_WILDCARDS = frozenset("*?[")
#: How many of the graph's tool names a refusal lists (a graph may have hundreds).
_LISTED = 20


def check_tool_names(policy: Policy, tools: Iterable[str], *, graph: str) -> None:
    """Refuse the first rule of ``policy`` whose ``tool`` matches none of ``tools`` (the tools
    of ``graph``) and does not say ``tool_may_be_absent``: a :class:`PolicyError` ``FILE:LINE:
    reason`` at the rule's line, with a did-you-mean."""
    names = sorted(set(tools))
    for rule in policy.rules:
        if rule.tool is None or rule.tool_may_be_absent:
            continue
        if any(fnmatchcase(name, rule.tool) for name in names):
            continue
        raise PolicyError(policy.source, rule.line or None, _absent(rule, rule.tool, names, graph))


def check_policies_tool_names(
    interceptors: Iterable[object], tools: Iterable[str], *, graph: str
) -> None:
    """:func:`check_tool_names` for every :class:`Policy` among a graph's ``interceptors``
    (other interceptors decide for themselves which tools they judge)."""
    names = frozenset(tools)
    for interceptor in interceptors:
        if isinstance(interceptor, Policy):
            check_tool_names(interceptor, names, graph=graph)


def _absent(rule: Rule, tool: str, names: list[str], graph: str) -> str:
    pattern = any(c in _WILDCARDS for c in tool)
    if pattern:
        said = f"rule {rule.id}: tool pattern {tool!r} matches no tool of graph {graph!r}"
    else:
        said = f"rule {rule.id}: tool {tool!r} is not a tool of graph {graph!r}"
    close = get_close_matches(tool, names, n=3, cutoff=0.75)
    if close:
        said += f"; did you mean {' or '.join(repr(c) for c in close)}?"
    if not names:
        said += " (the graph has no tools)"
    else:
        shown = ", ".join(names[:_LISTED])
        more = f" and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
        said += f" (its tools: {shown}{more})"
    return (
        f"{said}. The rule could never apply; fix the name, or say tool_may_be_absent: true "
        "if the tool may really be absent"
    )


def policy_for_tool(interceptors: Iterable[object], tool: str) -> list[dict[str, object]]:
    """What the policies among ``interceptors`` do with a call of ``tool`` at ``pre_tool_call``,
    in the order they are tried: one entry per rule that may apply (its id, action, condition,
    approver groups), then each policy's default. What ``approvals tools list`` shows."""
    said: list[dict[str, object]] = []
    for interceptor in interceptors:
        if not isinstance(interceptor, Policy):
            continue
        if InterceptionPoint.PRE_TOOL_CALL not in interceptor.points:
            continue
        ordered = sorted(interceptor.rules, key=lambda r: -r.priority)
        for rule in ordered:
            if not rule.applies_to(InterceptionPoint.PRE_TOOL_CALL, tool):
                continue
            said.append(
                {
                    "policy": interceptor.name,
                    "rule": rule.id,
                    "action": rule.action.value,
                    "when": rule.when.source if rule.when is not None else None,
                    "approvers": list(rule.approvers),
                }
            )
        said.append(
            {
                "policy": interceptor.name,
                "rule": None,
                "action": interceptor.default.value,
                "when": None,
                "approvers": [],
            }
        )
    return said
