"""An escalate rule's ``allow_always``: whether its approver may decide "always" (a standing
grant for the rest of the run, ``approvals.grants``), and within what bounds.

``allow_always: true`` offers it for any arguments the rule escalates; ``allow_always:
{within: {amount: {max: 100}}}`` only for calls whose top-level numeric arguments stay within
the limits (``min``, ``max``, both inclusive); a call outside them opens a request as before.
A grant is one approver's word, so a rule that needs a quorum cannot offer it.
"""

from __future__ import annotations

from agent_hooks import InterceptionPoint
from yaml.nodes import MappingNode, ScalarNode

from approvals.grants import Bound, Within
from approvals.policy.source import Fields, Reader

ALWAYS_FIELDS = ("within",)


def read_allow_always(
    reader: Reader, fields: Fields, what: str, points: frozenset[InterceptionPoint], quorum: int
) -> Within | None:
    """The rule's ``allow_always``: its bounds (none: any arguments), or ``None`` when the
    rule does not offer "always"."""
    if "allow_always" not in fields:
        return None
    node = fields.value("allow_always")
    field = f"{what}: allow_always"
    within: Within | None
    if isinstance(node, ScalarNode):
        within = Within() if reader.boolean(node, field) else None
    else:
        spec = reader.fields(node, field, ALWAYS_FIELDS).require("within")
        within = _within(reader, spec.value("within"), f"{field}.within")
    if within is None:
        return None
    if points != {InterceptionPoint.PRE_TOOL_CALL}:
        raise reader.error(
            fields.key("allow_always"),
            f"{what}: allow_always grants calls of a tool, so the rule must apply at "
            "pre_tool_call only",
        )
    if quorum > 1:
        raise reader.error(
            fields.key("allow_always"),
            f"{what}: allow_always is one approver's word, so it cannot go with a quorum of "
            f"{quorum}",
        )
    return within


def _within(reader: Reader, node: object, what: str) -> Within:
    if not isinstance(node, MappingNode):
        raise reader.error(None, f"{what}: expected a mapping of argument names to limits")
    names = reader.mapping(node, what)
    if not names.names():
        raise reader.error(node, f"{what}: name at least one argument")
    bounds: dict[str, Bound] = {}
    for name in names.names():
        limits_node = names.value(name)
        limits = reader.fields(limits_node, f"{what}.{name}", ("min", "max"))
        if not limits.names():
            raise reader.error(limits_node, f"{what}.{name}: give min, max or both")
        found: dict[str, float] = {}
        for key in limits.names():
            value = reader.scalar(limits.value(key))
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise reader.error(limits.value(key), f"{what}.{name}.{key}: expected a number")
            found[key] = value
        if "min" in found and "max" in found and found["min"] > found["max"]:
            raise reader.error(limits_node, f"{what}.{name}: min is more than max")
        bounds[name] = Bound(min=found.get("min"), max=found.get("max"))
    return Within(bounds=bounds)
