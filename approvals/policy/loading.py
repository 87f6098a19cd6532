"""Loading a policy file: every mistake is refused with ``FILE:LINE: reason``, once, at load time.

Conditions are compiled here, their variables checked against the ones a context provides,
regular expressions compiled, durations parsed, and every combination that could not do what
it says (a transform where transforms are forbidden, escalation fields on a deny rule, a
``tool`` filter at a point without a tool) refused rather than ignored.

This module reads the document and its rules; the readers of a rule's parts live beside it:
``conditions`` (``when``), ``transforms`` (``mask``, ``set``), ``escalate_fields`` (an escalate
rule's own fields) and ``scalars`` (names, enum values, interception points).
"""

from __future__ import annotations

from pathlib import Path

from agent_hooks import InterceptionPoint
from yaml.nodes import Node, SequenceNode

from approvals.decision_kinds import DecisionKind
from approvals.model import MAX_QUORUM
from approvals.policy.always import read_allow_always
from approvals.policy.conditions import read_condition
from approvals.policy.escalate_fields import (
    ESCALATE_FIELDS,
    read_allowed_decisions,
    read_on_expiry,
    read_redact,
)
from approvals.policy.evaluation import DEFAULT_RULE, POLICY_ERROR, Policy
from approvals.policy.rules import TOOL_POINTS, Action, DefaultAction, Mask, Rule, SetArgument
from approvals.policy.scalars import read_enum, read_name, read_optional_string, read_points
from approvals.policy.source import Fields, PolicyError, Reader
from approvals.policy.transforms import TRANSFORM_FIELDS, read_mask, read_set

POLICY_FIELDS = ("policy", "version", "description", "default", "points", "rules")
RULE_FIELDS = (
    "id",
    "description",
    "point",
    "tool",
    "when",
    "priority",
    "action",
    "reason",
    "approvers",
    "expires_in",
    "allow_edit",
    "quorum",
    "on_expiry",
    "then",
    "redact",
    "allowed_decisions",
    "allow_always",
    "mask",
    "set",
    "tool_may_be_absent",
)


def load_policy(path: str | Path) -> Policy:
    """Read and check a policy file. Raises :class:`PolicyError` (``FILE:LINE: reason``)."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(source, None, f"cannot read the file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise PolicyError(source, None, "the file is not UTF-8 text") from None
    return parse_policy(text, source)


def parse_policy(text: str, source_name: str = "<policy>") -> Policy:
    """Check a policy document given as text; ``source_name`` prefixes every error."""
    reader = Reader(source_name)
    top = reader.fields(reader.compose(text), "policy", POLICY_FIELDS)
    top.require("policy", "default", "rules")
    name = read_name(reader, top.value("policy"), "policy")
    version = 1
    if "version" in top:
        version = reader.integer(top.value("version"), "version")
        if version < 1:
            raise reader.error(top.value("version"), "version: must be 1 or more")
    description = read_optional_string(reader, top, "description")
    default_node = top.value("default")
    default = read_enum(reader, default_node, "default", DefaultAction)
    declared: frozenset[InterceptionPoint] | None = None
    if "points" in top:
        declared = frozenset(read_points(reader, top.value("points"), "points"))
        if default is DefaultAction.ESCALATE and InterceptionPoint.AGENT_SHUTDOWN in declared:
            raise reader.error(
                top.value("points"),
                "points: a policy whose default is escalate cannot govern agent_shutdown "
                "(nothing can be approved there)",
            )

    rules_node = top.value("rules")
    if not isinstance(rules_node, SequenceNode):
        raise reader.error(rules_node, "rules: expected a list of rules")
    rules: list[Rule] = []
    first_line: dict[str, int] = {}
    for index, node in enumerate(rules_node.value):
        rule = _rule(reader, node, index, declared)
        if rule.id in first_line:
            fields = reader.fields(node, "rule", RULE_FIELDS)
            raise reader.error(
                fields.value("id"),
                f"duplicate rule id {rule.id!r} (first defined on line {first_line[rule.id]})",
            )
        first_line[rule.id] = rule.line
        rules.append(rule)

    points = declared
    if points is None:
        points = frozenset(p for r in rules for p in r.points)
        if default is DefaultAction.ESCALATE and InterceptionPoint.AGENT_SHUTDOWN in points:
            raise reader.error(
                default_node,
                "default: escalate cannot apply at agent_shutdown, where a rule of this policy "
                "applies (nothing can be approved there); list the governed points in 'points'",
            )
    return Policy(
        name=name,
        version=version,
        description=description,
        default=default,
        rules=tuple(rules),
        points=points,
        source=source_name,
    )


def _rule(
    reader: Reader, node: Node, index: int, declared: frozenset[InterceptionPoint] | None
) -> Rule:
    """One rule of the ``rules`` list, its fields read and checked in the order the file's
    mistakes are reported: id, point, action, tool, the fields its action allows, then the
    action's own fields."""
    fields = reader.fields(node, f"rules[{index}]", RULE_FIELDS)
    fields.require("id")
    rule_id = read_name(reader, fields.value("id"), f"rules[{index}].id")
    if rule_id in (DEFAULT_RULE, POLICY_ERROR):
        raise reader.error(fields.value("id"), f"rule id {rule_id!r} is reserved")
    what = f"rule {rule_id}"
    fields.what = what
    fields.require("point", "action")
    points = _points(reader, fields, what, declared)
    action = read_enum(reader, fields.value("action"), f"{what}: action", Action)
    tool, tool_may_be_absent = _tool(reader, fields, what, points)
    _check_action_fields(reader, fields, what, action, points)
    mask, change = None, None
    if action is Action.TRANSFORM:
        mask, change = _transform(reader, fields, what, points)
    expires_in = None
    if "expires_in" in fields:
        expires_in = reader.duration(fields.value("expires_in"), f"{what}: expires_in")
    quorum = _quorum(reader, fields, what)
    on_expiry, then = read_on_expiry(reader, fields, what)
    redact = read_redact(reader, fields, what, frozenset(points)) if "redact" in fields else ()
    allowed, allow_edit = _decisions(reader, fields, what, points)
    always = read_allow_always(reader, fields, what, frozenset(points), quorum)
    return Rule(
        id=rule_id,
        points=frozenset(points),
        action=action,
        tool=tool,
        tool_may_be_absent=tool_may_be_absent,
        when=read_condition(reader, fields, what, frozenset(points)) if "when" in fields else None,
        priority=reader.integer(fields.value("priority"), f"{what}: priority")
        if "priority" in fields
        else 0,
        reason=read_optional_string(reader, fields, "reason", what),
        description=read_optional_string(reader, fields, "description", what),
        approvers=tuple(
            a for a, _ in reader.strings(fields.value("approvers"), f"{what}: approvers")
        )
        if "approvers" in fields
        else (),
        expires_in=expires_in,
        allow_edit=allow_edit,
        quorum=quorum,
        on_expiry=on_expiry,
        then=then,
        redact=redact,
        allowed_decisions=allowed,
        allow_always=always,
        mask=mask,
        set=change,
        line=int(node.start_mark.line) + 1,
    )


def _points(
    reader: Reader, fields: Fields, what: str, declared: frozenset[InterceptionPoint] | None
) -> list[InterceptionPoint]:
    """The rule's ``point``: one point or a list, each among the policy's ``points``."""
    point_node = fields.value("point")
    points = read_points(reader, point_node, f"{what}: point", single=True)
    if declared is not None:
        outside = sorted(p.value for p in points if p not in declared)
        if outside:
            raise reader.error(
                point_node,
                f"{what}: applies at {', '.join(outside)}, which the policy's points do not list",
            )
    return points


def _tool(
    reader: Reader, fields: Fields, what: str, points: list[InterceptionPoint]
) -> tuple[str | None, bool]:
    """The rule's ``tool`` (only where there is a tool), and ``tool_may_be_absent`` (only
    beside a ``tool``)."""
    tool = None
    if "tool" in fields:
        tool = reader.string(fields.value("tool"), f"{what}: tool")
        elsewhere = sorted(p.value for p in points if p not in TOOL_POINTS)
        if elsewhere:
            raise reader.error(
                fields.value("tool"),
                f"{what}: 'tool' applies only at pre_tool_call and post_tool_call, "
                f"but the rule also applies at {', '.join(elsewhere)}",
            )
    tool_may_be_absent = False
    if "tool_may_be_absent" in fields:
        tool_may_be_absent = reader.boolean(
            fields.value("tool_may_be_absent"), f"{what}: tool_may_be_absent"
        )
        if tool is None:
            raise reader.error(
                fields.key("tool_may_be_absent"),
                f"{what}: 'tool_may_be_absent' applies only to a rule that names a 'tool'",
            )
    return tool, tool_may_be_absent


def _check_action_fields(
    reader: Reader, fields: Fields, what: str, action: Action, points: list[InterceptionPoint]
) -> None:
    """Escalation fields only on an escalate rule, transform fields only on a transform rule,
    and no escalation at ``agent_shutdown``."""
    for field in ESCALATE_FIELDS:
        if field in fields and action is not Action.ESCALATE:
            raise reader.error(
                fields.key(field),
                f"{what}: {field!r} applies only to escalate rules (this rule's action is "
                f"{action.value})",
            )
    for field in TRANSFORM_FIELDS:
        if field in fields and action is not Action.TRANSFORM:
            raise reader.error(
                fields.key(field),
                f"{what}: {field!r} applies only to transform rules (this rule's action is "
                f"{action.value})",
            )
    if action is Action.ESCALATE and InterceptionPoint.AGENT_SHUTDOWN in points:
        raise reader.error(
            fields.value("point"),
            f"{what}: escalate cannot apply at agent_shutdown (nothing to approve)",
        )


def _transform(
    reader: Reader, fields: Fields, what: str, points: list[InterceptionPoint]
) -> tuple[Mask | None, SetArgument | None]:
    """A transform rule's ``mask`` or ``set`` (exactly one), where a transform is permitted."""
    point_node = fields.value("point")
    forbidden = sorted(p.value for p in points if not p.transform_permitted)
    if forbidden:
        raise reader.error(
            point_node,
            f"{what}: a transform is not permitted at {', '.join(forbidden)}",
        )
    present = [f for f in TRANSFORM_FIELDS if f in fields]
    if not present:
        raise reader.error(
            fields.value("action"), f"{what}: a transform rule needs 'mask' or 'set'"
        )
    if len(present) == 2:
        raise reader.error(fields.key("set"), f"{what}: give either 'mask' or 'set', not both")
    if "mask" in fields:
        return read_mask(reader, fields.value("mask"), what), None
    if set(points) != {InterceptionPoint.PRE_TOOL_CALL}:
        raise reader.error(
            point_node,
            f"{what}: 'set' changes tool arguments, so the rule must apply at pre_tool_call only",
        )
    return None, read_set(reader, fields.value("set"), what)


def _quorum(reader: Reader, fields: Fields, what: str) -> int:
    """An escalate rule's ``quorum``: how many distinct approvers must approve (1 unless set)."""
    if "quorum" not in fields:
        return 1
    quorum_node = fields.value("quorum")
    quorum = reader.integer(quorum_node, f"{what}: quorum")
    if not 1 <= quorum <= MAX_QUORUM:
        raise reader.error(
            quorum_node, f"{what}: quorum must be between 1 and {MAX_QUORUM}, not {quorum}"
        )
    return quorum


def _decisions(
    reader: Reader, fields: Fields, what: str, points: list[InterceptionPoint]
) -> tuple[tuple[str, ...], bool]:
    """An escalate rule's ``allowed_decisions`` and ``allow_edit``, which must agree: a list
    that leaves edit out turns edits off, and ``allow_edit: true`` beside it is refused."""
    allowed = read_allowed_decisions(reader, fields, what, frozenset(points))
    allow_edit = (
        reader.boolean(fields.value("allow_edit"), f"{what}: allow_edit")
        if "allow_edit" in fields
        else True
    )
    if allowed and allow_edit and DecisionKind.EDIT not in allowed:
        # Edits are off because the list leaves them out; allow_edit: true would contradict it.
        if "allow_edit" in fields:
            raise reader.error(
                fields.key("allow_edit"),
                f"{what}: allow_edit is true but allowed_decisions does not list edit",
            )
        allow_edit = False
    if allowed and not allow_edit and DecisionKind.EDIT in allowed:
        raise reader.error(
            fields.key("allowed_decisions"),
            f"{what}: allowed_decisions lists edit but allow_edit is false",
        )
    return allowed, allow_edit
