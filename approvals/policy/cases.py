"""Table-driven policy tests: a cases file lists contexts and the verdict each must get.

Each case is turned into a real AGENT-HOOKS context with ``AgentContextBuilder`` (the shape
the host sends), run through the policy, and compared with what the case expects.

This module reads a cases file; ``case_runs`` runs it against a policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from agent_hooks import InterceptionPoint
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from approvals.decision_kinds import DECISION_TYPES
from approvals.model import OnExpiry
from approvals.policy.evaluation import (
    TOOL_METADATA,
)
from approvals.policy.rules import CONTENT_POINTS, TOOL_POINTS
from approvals.policy.source import Fields, PolicyError, Reader, format_duration
from approvals.redaction import policy_path

CASES_FIELDS = ("policy", "cases")
CASE_FIELDS = (
    "name",
    "point",
    "tool",
    "args",
    "metadata",
    "principal",
    "run",
    "result",
    "content",
    "expect",
)
METADATA_FIELDS = TOOL_METADATA
RUN_FIELDS = ("id", "graph", "tool_count", "tool_counts")
EXPECT_FIELDS = (
    "decision",
    "rule",
    "warnings",
    "approvers",
    "expires_in",
    "allow_edit",
    "on_expiry",
    "redact",
    "allowed_decisions",
    "value",
)
OUTCOMES = ("allow", "warn", "deny", "escalate", "transform")
ABSENT: Any = object()


@dataclass(frozen=True, kw_only=True, slots=True)
class Expectation:
    """What a case expects: an outcome and, optionally, details of it."""

    decision: str
    rule: str | None = None
    warnings: tuple[str, ...] | None = None
    approvers: tuple[str, ...] | None = None
    expires_in: timedelta | None = ABSENT
    allow_edit: bool | None = None
    on_expiry: str | None = None
    #: The redacted argument paths, relative (``payment.card``); ``()``: none.
    redact: tuple[str, ...] | None = None
    #: The decisions approvers are offered (in ``DECISION_TYPES`` order, the default included).
    allowed_decisions: tuple[str, ...] | None = None
    value: Any = ABSENT

    def describe(self) -> str:
        parts = [self.decision]
        if self.rule is not None:
            parts.append(f"by {self.rule}")
        details = []
        if self.warnings is not None:
            details.append(f"warnings: [{', '.join(self.warnings)}]")
        if self.approvers is not None:
            details.append(f"approvers: [{', '.join(self.approvers)}]")
        if self.expires_in is not ABSENT:
            details.append(
                f"expires in {format_duration(self.expires_in)}" if self.expires_in else "no expiry"
            )
        if self.allow_edit is not None:
            details.append("edits allowed" if self.allow_edit else "no edits")
        if self.on_expiry is not None:
            details.append(f"on expiry: {self.on_expiry}")
        if self.redact is not None:
            details.append(redacted(self.redact))
        if self.allowed_decisions is not None:
            details.append(f"decisions: [{', '.join(self.allowed_decisions)}]")
        if self.value is not ABSENT:
            details.append(f"value: {self.value!r}")
        return " ".join(parts) + (f" ({'; '.join(details)})" if details else "")


@dataclass(frozen=True, kw_only=True, slots=True)
class Case:
    """One row of a cases file."""

    name: str
    point: InterceptionPoint
    expect: Expectation
    tool: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] | None = None
    principal: str | None = None
    run: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    content: Any = None
    line: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class CasesFile:
    """A parsed cases file; ``policy`` is the policy it names, relative to the file."""

    source: str
    cases: tuple[Case, ...]
    policy: Path | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseResult:
    """The outcome of one case: ``expected`` and ``got`` describe the verdicts in words."""

    name: str
    passed: bool
    expected: str
    got: str
    line: int

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "expected": self.expected,
            "got": self.got,
            "line": self.line,
        }


def load_cases(path: str | Path) -> CasesFile:
    """Read and check a cases file. Raises :class:`PolicyError` (``FILE:LINE: reason``)."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(source, None, f"cannot read the file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise PolicyError(source, None, "the file is not UTF-8 text") from None
    return parse_cases(text, source, base=Path(path).parent)


def parse_cases(text: str, source_name: str = "<cases>", base: Path | None = None) -> CasesFile:
    """Check a cases document given as text; ``base`` resolves its ``policy`` path."""
    reader = Reader(source_name)
    top = reader.fields(reader.compose(text), "cases file", CASES_FIELDS).require("cases")
    policy = None
    if "policy" in top:
        policy = (base or Path()) / reader.string(top.value("policy"), "policy")
    cases_node = top.value("cases")
    if not isinstance(cases_node, SequenceNode) or not cases_node.value:
        raise reader.error(cases_node, "cases: expected a non-empty list of cases")
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for index, node in enumerate(cases_node.value):
        case = _case(reader, node, index)
        if case.name in seen:
            raise reader.error(
                node, f"duplicate case name {case.name!r} (first on line {seen[case.name]})"
            )
        seen[case.name] = case.line
        cases.append(case)
    return CasesFile(source=source_name, cases=tuple(cases), policy=policy)


def _case(reader: Reader, node: Node, index: int) -> Case:
    fields = reader.fields(node, f"cases[{index}]", CASE_FIELDS).require("name")
    name = reader.string(fields.value("name"), f"cases[{index}].name")
    what = f"case {name!r}"
    fields.what = what
    fields.require("point", "expect")
    point_text = reader.string(fields.value("point"), f"{what}: point")
    try:
        point = InterceptionPoint(point_text)
    except ValueError:
        known = ", ".join(p.value for p in InterceptionPoint)
        raise reader.error(
            fields.value("point"), f"{what}: unknown point {point_text!r} (points: {known})"
        ) from None

    def only_at(names: tuple[str, ...], points: frozenset[InterceptionPoint], where: str) -> None:
        for key in names:
            if key in fields and point not in points:
                raise reader.error(
                    fields.key(key), f"{what}: {key!r} applies only at {where}, not {point.value}"
                )

    tool_points = "pre_tool_call and post_tool_call"
    only_at(("tool", "args", "metadata"), TOOL_POINTS, tool_points)
    only_at(("result",), frozenset({InterceptionPoint.POST_TOOL_CALL}), "post_tool_call")
    only_at(("content",), CONTENT_POINTS, "input, output and post_model_call")
    tool = None
    if point in TOOL_POINTS:
        fields.require("tool")
        tool = reader.string(fields.value("tool"), f"{what}: tool")
    args: dict[str, Any] = {}
    if "args" in fields:
        reader.mapping(fields.value("args"), f"{what}: args")
        args = reader.data(fields.value("args"), f"{what}: args")
    metadata = None
    if "metadata" in fields:
        reader.fields(fields.value("metadata"), f"{what}: metadata", METADATA_FIELDS)
        metadata = reader.data(fields.value("metadata"), f"{what}: metadata")
    run: dict[str, Any] = {}
    if "run" in fields:
        run = _run(reader, fields.value("run"), what, tool)
    return Case(
        name=name,
        point=point,
        expect=_expectation(reader, fields.value("expect"), what),
        tool=tool,
        args=args,
        metadata=metadata,
        principal=reader.string(fields.value("principal"), f"{what}: principal", empty=True)
        if "principal" in fields
        else None,
        run=run,
        result=reader.data(fields.value("result"), what) if "result" in fields else None,
        content=reader.data(fields.value("content"), what) if "content" in fields else None,
        line=int(node.start_mark.line) + 1,
    )


def _run(reader: Reader, node: Node, what: str, tool: str | None) -> dict[str, Any]:
    fields = reader.fields(node, f"{what}: run", RUN_FIELDS)
    run: dict[str, Any] = {}
    for key in ("id", "graph"):
        if key in fields:
            run[key] = reader.string(fields.value(key), f"{what}: run.{key}")
    counts: dict[str, int] = {}
    if "tool_counts" in fields:
        counts_fields = reader.mapping(fields.value("tool_counts"), f"{what}: run.tool_counts")
        for name in counts_fields.names():
            counts[name] = _count(reader, counts_fields.value(name), f"{what}: run.tool_counts")
    if "tool_count" in fields:
        if tool is None:
            raise reader.error(
                fields.key("tool_count"), f"{what}: run.tool_count needs a tool (a tool point)"
            )
        counts[tool] = _count(reader, fields.value("tool_count"), f"{what}: run.tool_count")
    run["tool_counts"] = counts
    return run


def _count(reader: Reader, node: Node, what: str) -> int:
    value = reader.integer(node, what)
    if value < 0:
        raise reader.error(node, f"{what}: must be 0 or more")
    return value


def _expectation(reader: Reader, node: Node, what: str) -> Expectation:
    if not isinstance(node, MappingNode):
        decision = reader.string(node, f"{what}: expect")
        if decision not in OUTCOMES:
            raise reader.error(
                node, f"{what}: unknown outcome {decision!r} (allowed: {', '.join(OUTCOMES)})"
            )
        return Expectation(decision=decision)
    fields = reader.fields(node, f"{what}: expect", EXPECT_FIELDS).require("decision")
    decision = reader.string(fields.value("decision"), f"{what}: expect.decision")
    if decision not in OUTCOMES:
        raise reader.error(
            fields.value("decision"),
            f"{what}: unknown outcome {decision!r} (allowed: {', '.join(OUTCOMES)})",
        )
    for key, applies in (
        ("approvers", "escalate"),
        ("expires_in", "escalate"),
        ("allow_edit", "escalate"),
        ("on_expiry", "escalate"),
        ("redact", "escalate"),
        ("allowed_decisions", "escalate"),
        ("value", "transform"),
    ):
        if key in fields and decision != applies:
            raise reader.error(
                fields.key(key), f"{what}: expect.{key} applies only to {applies}, not {decision}"
            )
    expires_in: timedelta | None = ABSENT
    if "expires_in" in fields:
        node_expires = fields.value("expires_in")
        expires_in = (
            None  # null: the escalation must not expire
            if isinstance(node_expires, ScalarNode) and reader.scalar(node_expires) is None
            else reader.duration(node_expires, f"{what}: expect.expires_in")
        )
    return Expectation(
        decision=decision,
        rule=reader.string(fields.value("rule"), f"{what}: expect.rule")
        if "rule" in fields
        else None,
        warnings=tuple(
            w for w, _ in reader.strings(fields.value("warnings"), f"{what}: expect.warnings")
        )
        if "warnings" in fields
        else None,
        approvers=tuple(
            a for a, _ in reader.strings(fields.value("approvers"), f"{what}: expect.approvers")
        )
        if "approvers" in fields
        else None,
        expires_in=expires_in,
        allow_edit=reader.boolean(fields.value("allow_edit"), f"{what}: expect.allow_edit")
        if "allow_edit" in fields
        else None,
        on_expiry=_enum_value(reader, fields, "on_expiry", OnExpiry, what),
        redact=_redact_paths(reader, fields.value("redact"), f"{what}: expect.redact")
        if "redact" in fields
        else None,
        allowed_decisions=_decisions(reader, fields.value("allowed_decisions"), what)
        if "allowed_decisions" in fields
        else None,
        value=reader.data(fields.value("value"), f"{what}: expect.value")
        if "value" in fields
        else ABSENT,
    )


def _redact_paths(reader: Reader, node: Node, what: str) -> tuple[str, ...]:
    paths = []
    for text, item in reader.strings(node, what):
        try:
            paths.append(policy_path(text))
        except ValueError as exc:
            raise reader.error(item, f"{what}: {exc}") from None
    return tuple(paths)


def redacted(paths: tuple[str, ...]) -> str:
    return f"redact: [{', '.join(f'args.{p}' for p in paths)}]" if paths else "nothing redacted"


def _enum_value(
    reader: Reader, fields: Fields, name: str, kind: type[OnExpiry], what: str
) -> str | None:
    if name not in fields:
        return None
    value = reader.string(fields.value(name), f"{what}: expect.{name}")
    allowed = [m.value for m in kind]
    if value not in allowed:
        raise reader.error(
            fields.value(name),
            f"{what}: expect.{name}: unknown value {value!r} (allowed: {', '.join(allowed)})",
        )
    return value


def _decisions(reader: Reader, node: Node, what: str) -> tuple[str, ...]:
    listed = reader.strings(node, f"{what}: expect.allowed_decisions")
    for value, item in listed:
        if value not in DECISION_TYPES:
            raise reader.error(
                item, f"{what}: expect.allowed_decisions: {value!r} is not a decision"
            )
    names = {value for value, _ in listed}
    return tuple(d for d in DECISION_TYPES if d in names)
