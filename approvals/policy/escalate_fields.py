"""An escalate rule's own fields: the decisions its approvers may take, what happens when it
expires (with its escalation chain) and the tool arguments its approvers are not shown."""

from __future__ import annotations

from agent_hooks import InterceptionPoint
from yaml.nodes import SequenceNode

from approvals.decision_kinds import DECISION_TYPES, KIND_RULES
from approvals.model import EscalationStep, OnExpiry
from approvals.policy.scalars import read_enum
from approvals.policy.source import Fields, Reader
from approvals.redaction import overlap, policy_path

ESCALATE_FIELDS = (
    "approvers",
    "expires_in",
    "allow_edit",
    "quorum",
    "on_expiry",
    "then",
    "redact",
    "allowed_decisions",
    "allow_always",
)
#: The fields of one step of an escalation chain (``then``), and how long a chain may be.
STEP_FIELDS = ("approvers", "expires_in")
MAX_CHAIN = 10


def read_allowed_decisions(
    reader: Reader, fields: Fields, what: str, points: frozenset[InterceptionPoint]
) -> tuple[str, ...]:
    """An escalate rule's ``allowed_decisions`` (in ``DECISION_TYPES`` order), or ``()`` for
    the default. ``respond`` (a kind that takes a message, ``approvals.decision_kinds``)
    answers a tool call in the tool's place, so it needs a rule that applies at
    ``pre_tool_call`` only; a decision the engine does not know is refused."""
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
    answers = [kind for kind, rules in KIND_RULES.items() if kind in names and rules.takes_message]
    if answers and points != {InterceptionPoint.PRE_TOOL_CALL}:
        raise reader.error(
            node,
            f"{what}: {answers[0]} answers a tool call in the tool's place, so the rule must "
            "apply at pre_tool_call only",
        )
    return tuple(d for d in DECISION_TYPES if d in names)


def read_on_expiry(
    reader: Reader, fields: Fields, what: str
) -> tuple[OnExpiry, tuple[EscalationStep, ...]]:
    """An escalate rule's ``on_expiry`` and its escalation chain (``then``), which go together:
    a chain without ``on_expiry: escalate`` would never be used, and escalating needs a chain."""
    on_expiry = OnExpiry.REJECT
    if "on_expiry" in fields:
        on_expiry = read_enum(reader, fields.value("on_expiry"), f"{what}: on_expiry", OnExpiry)
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


def read_redact(
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
