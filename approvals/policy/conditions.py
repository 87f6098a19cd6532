"""A rule's condition (``when``): compiled as CEL, its variables checked against the ones a
context provides at the points the rule applies at."""

from __future__ import annotations

import re

import cel
from agent_hooks import InterceptionPoint
from yaml.nodes import ScalarNode

from approvals.policy.evaluation import VARIABLES
from approvals.policy.rules import CONTENT_POINTS, TOOL_POINTS, Condition
from approvals.policy.source import Fields, Reader

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
_NEEDS = {
    "tool": (TOOL_POINTS, "is empty except at pre_tool_call and post_tool_call"),
    "args": (TOOL_POINTS, "is empty except at pre_tool_call and post_tool_call"),
    "result": (
        frozenset({InterceptionPoint.POST_TOOL_CALL}),
        "is null except at post_tool_call",
    ),
    "content": (CONTENT_POINTS, "is null except at input, output and post_model_call"),
}


def read_condition(
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
