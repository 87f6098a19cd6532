"""Loading a policy file: every mistake is refused with ``FILE:LINE: reason``, once, at load time.

Conditions are compiled here, their variables checked against the ones a context provides,
regular expressions compiled, durations parsed, and every combination that could not do what
it says (a transform where transforms are forbidden, escalation fields on a deny rule, a
``tool`` filter at a point without a tool) refused rather than ignored.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TypeVar

import cel
from agent_hooks import InterceptionPoint
from agent_hooks.path import PathError
from agent_hooks.path import parse as parse_target_path
from yaml.nodes import Node, ScalarNode, SequenceNode

from approvals.model import DECISION_TYPES, EscalationStep, OnExpiry
from approvals.policy.evaluation import DEFAULT_RULE, POLICY_ERROR, VARIABLES, Policy
from approvals.policy.rules import (
    CONTENT_POINTS,
    TOOL_POINTS,
    Action,
    Condition,
    DefaultAction,
    Mask,
    Rule,
    SetArgument,
)
from approvals.policy.source import Fields, PolicyError, Reader
from approvals.redaction import overlap, policy_path

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
    "mask",
    "set",
)
ESCALATE_FIELDS = (
    "approvers",
    "expires_in",
    "allow_edit",
    "quorum",
    "on_expiry",
    "then",
    "redact",
    "allowed_decisions",
)
MAX_QUORUM = 20
#: The fields of one step of an escalation chain (``then``), and how long a chain may be.
STEP_FIELDS = ("approvers", "expires_in")
MAX_CHAIN = 10
TRANSFORM_FIELDS = ("mask", "set")
MASK_FIELDS = ("pattern", "replacement")
SET_FIELDS = ("path", "value")
DEFAULT_MASK = "[redacted]"

E = TypeVar("E", Action, DefaultAction, OnExpiry)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_PATH_PART = re.compile(r"([A-Za-z0-9_-]+)((?:\[\d+\])*)")
_CEL_ERROR = re.compile(r"<input>:(\d+):(\d+): ([^\n]*)")
# Names a comprehension macro or cel.bind binds; Program.variables() lists them as identifiers.
_BOUND = re.compile(
    r"\b(?:all|exists|exists_one|existsOne|map|filter|transformList|transformMap|"
    r"transformMapEntry|bind)\s*\(\s*([A-Za-z_]\w*)\s*,(?:\s*([A-Za-z_]\w*)\s*,)?"
)
# CEL's type names are identifiers too (``type(content) == string``).
_TYPE_NAMES = frozenset(
    {"bool", "bytes", "double", "int", "list", "map", "null_type", "string", "type", "uint"}
)
_POINTS = {p.value: p for p in InterceptionPoint}
_NEEDS = {
    "tool": (TOOL_POINTS, "is empty except at pre_tool_call and post_tool_call"),
    "args": (TOOL_POINTS, "is empty except at pre_tool_call and post_tool_call"),
    "result": (
        frozenset({InterceptionPoint.POST_TOOL_CALL}),
        "is null except at post_tool_call",
    ),
    "content": (CONTENT_POINTS, "is null except at input, output and post_model_call"),
}


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
    name = _name(reader, top.value("policy"), "policy")
    version = 1
    if "version" in top:
        version = reader.integer(top.value("version"), "version")
        if version < 1:
            raise reader.error(top.value("version"), "version: must be 1 or more")
    description = _optional_string(reader, top, "description")
    default_node = top.value("default")
    default = _enum(reader, default_node, "default", DefaultAction)
    declared: frozenset[InterceptionPoint] | None = None
    if "points" in top:
        declared = frozenset(_points(reader, top.value("points"), "points"))
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
    fields = reader.fields(node, f"rules[{index}]", RULE_FIELDS)
    fields.require("id")
    rule_id = _name(reader, fields.value("id"), f"rules[{index}].id")
    if rule_id in (DEFAULT_RULE, POLICY_ERROR):
        raise reader.error(fields.value("id"), f"rule id {rule_id!r} is reserved")
    what = f"rule {rule_id}"
    fields.what = what
    fields.require("point", "action")

    point_node = fields.value("point")
    points = _points(reader, point_node, f"{what}: point", single=True)
    if declared is not None:
        outside = sorted(p.value for p in points if p not in declared)
        if outside:
            raise reader.error(
                point_node,
                f"{what}: applies at {', '.join(outside)}, which the policy's points do not list",
            )
    action_node = fields.value("action")
    action = _enum(reader, action_node, f"{what}: action", Action)

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
            point_node, f"{what}: escalate cannot apply at agent_shutdown (nothing to approve)"
        )

    mask = change = None
    if action is Action.TRANSFORM:
        forbidden = sorted(p.value for p in points if not p.transform_permitted)
        if forbidden:
            raise reader.error(
                point_node,
                f"{what}: a transform is not permitted at {', '.join(forbidden)}",
            )
        present = [f for f in TRANSFORM_FIELDS if f in fields]
        if not present:
            raise reader.error(action_node, f"{what}: a transform rule needs 'mask' or 'set'")
        if len(present) == 2:
            raise reader.error(fields.key("set"), f"{what}: give either 'mask' or 'set', not both")
        if "mask" in fields:
            mask = _mask(reader, fields.value("mask"), what)
        else:
            if set(points) != {InterceptionPoint.PRE_TOOL_CALL}:
                raise reader.error(
                    point_node,
                    f"{what}: 'set' changes tool arguments, so the rule must apply at "
                    "pre_tool_call only",
                )
            change = _set(reader, fields.value("set"), what)

    expires_in = None
    if "expires_in" in fields:
        expires_in = reader.duration(fields.value("expires_in"), f"{what}: expires_in")
    quorum = 1
    if "quorum" in fields:
        quorum_node = fields.value("quorum")
        quorum = reader.integer(quorum_node, f"{what}: quorum")
        if not 1 <= quorum <= MAX_QUORUM:
            raise reader.error(
                quorum_node, f"{what}: quorum must be between 1 and {MAX_QUORUM}, not {quorum}"
            )
    on_expiry, then = _on_expiry(reader, fields, what)
    redact = _redact(reader, fields, what, frozenset(points)) if "redact" in fields else ()
    allowed = _allowed_decisions(reader, fields, what, frozenset(points))
    allow_edit = (
        reader.boolean(fields.value("allow_edit"), f"{what}: allow_edit")
        if "allow_edit" in fields
        else True
    )
    if allowed and allow_edit and "edit" not in allowed:
        # Edits are off because the list leaves them out; allow_edit: true would contradict it.
        if "allow_edit" in fields:
            raise reader.error(
                fields.key("allow_edit"),
                f"{what}: allow_edit is true but allowed_decisions does not list edit",
            )
        allow_edit = False
    if allowed and not allow_edit and "edit" in allowed:
        raise reader.error(
            fields.key("allowed_decisions"),
            f"{what}: allowed_decisions lists edit but allow_edit is false",
        )
    return Rule(
        id=rule_id,
        points=frozenset(points),
        action=action,
        tool=tool,
        when=_condition(reader, fields, what, frozenset(points)) if "when" in fields else None,
        priority=reader.integer(fields.value("priority"), f"{what}: priority")
        if "priority" in fields
        else 0,
        reason=_optional_string(reader, fields, "reason", what),
        description=_optional_string(reader, fields, "description", what),
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
        mask=mask,
        set=change,
        line=int(node.start_mark.line) + 1,
    )


def _allowed_decisions(
    reader: Reader, fields: Fields, what: str, points: frozenset[InterceptionPoint]
) -> tuple[str, ...]:
    """An escalate rule's ``allowed_decisions`` (in ``DECISION_TYPES`` order), or ``()`` for
    the default. ``respond`` answers a tool call in the tool's place, so it needs a rule that
    applies at ``pre_tool_call`` only; a decision the engine does not know is refused."""
    if "allowed_decisions" not in fields:
        return ()
    node = fields.value("allowed_decisions")
    listed = reader.strings(node, f"{what}: allowed_decisions")
    if not listed:
        raise reader.error(node, f"{what}: allowed_decisions must name at least one decision")
    for value, item in listed:
        if value not in DECISION_TYPES:
            raise reader.error(
                item,
                f"{what}: allowed_decisions: {value!r} is not a decision "
                f"(expected {', '.join(DECISION_TYPES)})",
            )
    names = {value for value, _ in listed}
    if "respond" in names and points != {InterceptionPoint.PRE_TOOL_CALL}:
        raise reader.error(
            node,
            f"{what}: respond answers a tool call in the tool's place, so the rule must apply "
            "at pre_tool_call only",
        )
    return tuple(d for d in DECISION_TYPES if d in names)


def _on_expiry(
    reader: Reader, fields: Fields, what: str
) -> tuple[OnExpiry, tuple[EscalationStep, ...]]:
    """An escalate rule's ``on_expiry`` and its escalation chain (``then``), which go together:
    a chain without ``on_expiry: escalate`` would never be used, and escalating needs a chain."""
    on_expiry = OnExpiry.REJECT
    if "on_expiry" in fields:
        on_expiry = _enum(reader, fields.value("on_expiry"), f"{what}: on_expiry", OnExpiry)
    if "then" not in fields:
        if on_expiry is OnExpiry.ESCALATE:
            raise reader.error(
                fields.value("on_expiry"),
                f"{what}: on_expiry: escalate needs an escalation chain in 'then' "
                "(a list of {approvers, expires_in} steps)",
            )
        return on_expiry, ()
    if on_expiry is not OnExpiry.ESCALATE:
        raise reader.error(
            fields.key("then"),
            f"{what}: 'then' is an escalation chain, used only with on_expiry: escalate",
        )
    node = fields.value("then")
    if not isinstance(node, SequenceNode):
        raise reader.error(
            node, f"{what}: then: expected a list of {{approvers, expires_in}} steps"
        )
    if not node.value:
        raise reader.error(node, f"{what}: then: name at least one escalation step")
    if len(node.value) > MAX_CHAIN:
        raise reader.error(
            node.value[MAX_CHAIN], f"{what}: then: at most {MAX_CHAIN} escalation steps"
        )
    steps = []
    for index, item in enumerate(node.value):
        step = f"{what}: then[{index}]"
        step_fields = reader.fields(item, step, STEP_FIELDS).require(*STEP_FIELDS)
        approvers = reader.strings(step_fields.value("approvers"), f"{step}.approvers")
        if not approvers:
            raise reader.error(
                step_fields.value("approvers"), f"{step}.approvers: name at least one group"
            )
        steps.append(
            EscalationStep(
                approvers=tuple(a for a, _ in approvers),
                expires_in=reader.duration(step_fields.value("expires_in"), f"{step}.expires_in"),
            )
        )
    return on_expiry, tuple(steps)


def _redact(
    reader: Reader, fields: Fields, what: str, points: frozenset[InterceptionPoint]
) -> tuple[str, ...]:
    """An escalate rule's ``redact``: the tool arguments its approvers are not shown."""
    node = fields.value("redact")
    if points != {InterceptionPoint.PRE_TOOL_CALL}:
        raise reader.error(
            fields.key("redact"),
            f"{what}: 'redact' names tool arguments, so the rule must apply at pre_tool_call only",
        )
    entries = reader.strings(node, f"{what}: redact")
    if not entries:
        raise reader.error(node, f"{what}: redact: name at least one argument (args.<key>)")
    paths: list[str] = []
    for text, item in entries:
        try:
            path = policy_path(text)
        except ValueError as exc:
            raise reader.error(item, f"{what}: redact: {exc}") from None
        paths.append(path)
        nested = overlap(paths)
        if nested is not None:
            raise reader.error(
                item,
                f"{what}: redact: args.{nested[0]} lies inside args.{nested[1]}, which is "
                "redacted whole already",
            )
    return tuple(paths)


def _condition(
    reader: Reader, fields: Fields, what: str, points: frozenset[InterceptionPoint]
) -> Condition:
    node = fields.value("when")
    # Trailing newlines (a literal block's) would put an end-of-input error past the text.
    source = reader.string(node, f"{what}: when").rstrip()
    try:
        program = cel.compile(source)
    except ValueError as exc:
        found = _CEL_ERROR.search(str(exc))
        line = int(node.start_mark.line) + 1
        if found is None:
            detail = str(exc).splitlines()[0] if str(exc) else "syntax error"
        else:
            detail = f"<input>:{found.group(1)}:{found.group(2)}: {found.group(3)}"
            if isinstance(node, ScalarNode) and node.style == "|":
                # A literal block keeps its lines: point at the one CEL complains about.
                line += int(found.group(1))
        raise reader.error(line, f"{what}: condition does not compile: {detail}") from None
    bound = {name for match in _BOUND.finditer(source) for name in match.groups() if name}
    used = frozenset(program.variables()) - bound - _TYPE_NAMES
    unknown = sorted(used - VARIABLES)
    if unknown:
        raise reader.error(
            node,
            f"{what}: unknown variable {unknown[0]!r} in condition "
            f"(variables: {', '.join(sorted(VARIABLES))})",
        )
    for variable, (where, note) in _NEEDS.items():
        if variable in used and not points & where:
            raise reader.error(
                node,
                f"{what}: the condition uses {variable!r}, which {note} "
                f"(the rule applies at {', '.join(sorted(p.value for p in points))})",
            )
    return Condition(source=source, program=program, variables=used)


def _mask(reader: Reader, node: Node, what: str) -> Mask:
    fields = reader.fields(node, f"{what}: mask", MASK_FIELDS).require("pattern")
    pattern_node = fields.value("pattern")
    text = reader.string(pattern_node, f"{what}: mask.pattern")
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise reader.error(
            pattern_node, f"{what}: mask.pattern is not a valid regular expression: {exc}"
        ) from None
    if pattern.search("") is not None:
        raise reader.error(pattern_node, f"{what}: mask.pattern matches the empty string")
    replacement = DEFAULT_MASK
    if "replacement" in fields:
        replacement = reader.string(
            fields.value("replacement"), f"{what}: mask.replacement", empty=True
        )
        try:
            # Compiling the template happens on the first substitution: do one now.
            pattern.sub(replacement, "")
        except (re.error, IndexError) as exc:
            raise reader.error(
                fields.value("replacement"), f"{what}: mask.replacement is invalid: {exc}"
            ) from None
    return Mask(pattern=pattern, replacement=replacement)


def _set(reader: Reader, node: Node, what: str) -> SetArgument:
    fields = reader.fields(node, f"{what}: set", SET_FIELDS).require("path", "value")
    path_node = fields.value("path")
    text = reader.string(path_node, f"{what}: set.path")
    segments: list[str | int] = []
    for part in text.split("."):
        match = _PATH_PART.fullmatch(part)
        if match is None:
            raise reader.error(
                path_node,
                f"{what}: set.path {text!r} is not a key path such as currency, "
                "address.country or items[0].sku (keys: letters, digits, _ and -)",
            )
        segments.append(match.group(1))
        segments.extend(int(i) for i in re.findall(r"\[(\d+)\]", match.group(2)))
    change = SetArgument(path=tuple(segments), value=reader.data(fields.value("value"), what))
    try:
        parse_target_path(change.target_path)
    except PathError as exc:  # the grammar above is a subset; this guards against drift
        raise reader.error(path_node, f"{what}: set.path is invalid: {exc}") from None
    return change


def _points(
    reader: Reader, node: Node, what: str, *, single: bool = True
) -> list[InterceptionPoint]:
    values = reader.strings(node, what, single=single)
    if not values:
        raise reader.error(node, f"{what}: name at least one interception point")
    out = []
    for value, item in values:
        point = _POINTS.get(value)
        if point is None:
            raise reader.error(
                item, f"{what}: unknown point {value!r} (points: {', '.join(_POINTS)})"
            )
        out.append(point)
    return out


def _enum(reader: Reader, node: Node, what: str, kind: type[E]) -> E:
    value = reader.string(node, what)
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(m.value for m in kind)
        raise reader.error(node, f"{what}: unknown value {value!r} (allowed: {allowed})") from None


def _name(reader: Reader, node: Node, what: str) -> str:
    value = reader.string(node, what)
    if not _NAME.fullmatch(value):
        raise reader.error(
            node,
            f"{what}: {value!r} is not a valid name (letters, digits, '_', '.', '-'; "
            "starting with a letter or digit)",
        )
    return value


def _optional_string(reader: Reader, fields: Fields, name: str, what: str = "policy") -> str | None:
    node = fields.get(name)
    return None if node is None else reader.string(node, f"{what}: {name}")
