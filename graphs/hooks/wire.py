"""What ``HostEmitter`` (``graphs.hooks.emitter``) hands agent-hooks' Rust core and reads back from
it: a context's text, serialized once (``JsonContext``, ``Wire``), the §5 gate of an interceptor's
verdict, kept per immutable answer, and the record the core finalized, read back reusing the
values it echoes. Each gives what the SDK's own code would give, or falls back to that code."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Final

import orjson
from agent_hooks import (
    CompositionConfig,
    Decision,
    EnforcementMode,
    HostError,
    InterceptionPoint,
    InterceptionRecord,
    Verdict,
    VerdictSummary,
    Warning,
    _core,
)
from agent_hooks.context import AgentContext
from agent_hooks.emitter import _host_error_of, _Outcome

#: orjson refuses what stdlib ``json`` refuses or writes differently (dataclasses, datetimes,
#: subclasses of str/int/dict/list); what it still accepts and ``json`` does not (a tuple, a
#: plain Enum, a UUID, NaN written as null) does not read back equal, which sends the context
#: to the SDK's path.
_STRICT: Final = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)
#: ``agent_hooks._marshal.dumps`` is ``json.dumps(obj, allow_nan=False)``, which builds an
#: encoder per call; this is the same encoder, built once (same text, same errors).
_STDLIB: Final = json.JSONEncoder(allow_nan=False)
#: Distinct verdicts kept (interceptors answer with few distinct verdicts).
VERDICT_MEMO: Final = 512
#: ``Enum(value)`` by dictionary: the enum call costs more than the rest of a lookup.
POINTS: Final = {p.value: p for p in InterceptionPoint}
_MODES: Final = {m.value: m for m in EnforcementMode}

#: What identifies an immutable verdict's wire text: decision, reason, message, warnings, labels.
_VerdictKey = tuple[str, str | None, str | None, tuple[Warning, ...], tuple[str, ...]]
#: The §5 gate's outcome by immutable verdict: a pure function of the key, so one table serves
#: every emitter (a session builds a new one per invocation).
GATED: dict[_VerdictKey, Verdict] = {}


class JsonContext(dict[str, Any]):
    """A context (a JSON value, by the contract) whose deep copy is a JSON round trip.

    The SDK's emitter gives every interceptor its own deep copy of the context (§7 isolation);
    ``copy.deepcopy`` walks it object by object, which is most of an emission's cost. orjson's
    round trip yields the same independent copy several times faster. A value orjson cannot
    carry (an integer beyond 64 bits, a non-string key) falls back to ``copy.deepcopy``.
    ``HostEmitter`` parses its copies from the text it already has, which is the same thing."""

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        try:
            copied: dict[str, Any] = orjson.loads(orjson.dumps(self))
        except (TypeError, orjson.JSONEncodeError):
            return {k: copy.deepcopy(v, memo) for k, v in self.items()}
        return copied


@dataclass(slots=True)
class Wire:
    """One emission's context as the core reads it."""

    text: str
    #: A fresh copy not handed out yet (the one the purity check parsed).
    spare: Any
    #: ``copy.deepcopy`` of this context is an orjson round trip (``JsonContext``), so a copy
    #: can be parsed from ``text``; otherwise it is ``copy.deepcopy`` itself.
    by_json: bool
    #: The input identity, when the declared provider is jcs-sha256.
    identity: str | None = None
    #: A transform rewrote the context: ``text`` and ``identity`` no longer describe it.
    stale: bool = False
    #: Verdicts already had from the first interceptors, handed to the SDK's dispatch in
    #: their order instead of invoking those interceptors again (``HostEmitter._dispatch``).
    replay: list[Verdict] | None = None

    def copy_of(self, ctx: AgentContext) -> Any:
        """What ``copy.deepcopy(ctx)`` returns, for a context the purity check passed."""
        if self.stale or not self.by_json:
            return copy.deepcopy(ctx)
        spare, self.spare = self.spare, None
        return spare if spare is not None else orjson.loads(self.text)


def wire_of(ctx: AgentContext) -> Wire | None:
    """The orjson text of ``ctx`` when it is plain JSON data, else ``None``.

    Plain means: orjson writes it under ``_STRICT`` and reads it back equal (``==``, which tells
    a list from a tuple and a NaN or an Enum from what orjson wrote for it). Such a value is one
    stdlib ``json`` writes without error and parses to the same JSON value, so the core,
    reading either text, computes the same thing."""
    kind = type(ctx)
    if kind is not dict and kind is not JsonContext:
        return None
    top = dict(ctx)
    try:
        data = orjson.dumps(top, option=_STRICT)
        spare = orjson.loads(data)
    except (TypeError, orjson.JSONEncodeError, orjson.JSONDecodeError):
        return None
    if spare != top:
        return None
    return Wire(text=data.decode(), spare=spare, by_json=kind is not dict)


def fast_dumps(value: Any) -> str:
    """orjson text of ``value``, or stdlib's when orjson would write it differently."""
    try:
        data = orjson.dumps(value, option=_STRICT)
    except (TypeError, orjson.JSONEncodeError):
        return _STDLIB.encode(value)
    return data.decode()


def loads(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def record_of(
    obj: dict[str, Any],
    declared: str | None,
    outcome: _Outcome,
    combined_wire: dict[str, Any],
    options: dict[str, Any],
    composition: CompositionConfig,
) -> InterceptionRecord:
    """``InterceptionRecord.from_core(obj)`` with the declared provider, reusing the values the
    record echoes when its wire is what went in (they are frozen), and enums by dictionary.
    ``combined_wire``: ``outcome.combined.to_wire()``."""
    combined = outcome.combined
    vw = obj["verdict"]
    immutable = combined.approval is None and combined.transform is None
    verdict = (
        combined
        if immutable and combined.evidence is None and vw == combined_wire
        else Verdict._from_core(vw)
    )
    summaries = obj.get("verdicts") or []
    comp = obj.get("composition")
    return InterceptionRecord(
        interception_point=POINTS.get(obj["interception_point"])
        or InterceptionPoint(obj["interception_point"]),
        mode=_MODES.get(obj["mode"]) or EnforcementMode(obj["mode"]),
        verdict=verdict,
        input_identity=obj.get("input_identity"),
        enforced_identity=obj.get("enforced_identity"),
        identity_provider=declared,
        session_id=obj.get("session_id", ""),
        sequence=obj.get("sequence", -1),
        timestamp=obj.get("timestamp"),
        trace=obj.get("trace"),
        decided_by=obj.get("decided_by"),
        composition=composition
        if comp == options["composition"]
        else CompositionConfig.from_wire(comp),
        declaration=obj.get("declaration"),
        verdicts=outcome.verdicts
        if summaries == options["verdicts"]
        else tuple(VerdictSummary.from_wire(v) for v in summaries),
        fold_truncated=obj.get("fold_truncated"),
        resolved_by=obj.get("resolved_by"),
        interceptors_registered=obj.get("interceptors_registered", 0),
    )


def key_of(raw: Any) -> _VerdictKey | None:
    """The fields an immutable verdict's wire text is made of, or ``None`` for any other."""
    if type(raw) is not Verdict:
        return None
    if raw.approval is not None or raw.transform is not None or raw.evidence is not None:
        return None
    decision, reason, message = raw.decision, raw.reason, raw.message
    warnings, labels = raw.warnings, raw.result_labels
    if (
        type(decision) is not Decision
        or not (reason is None or type(reason) is str)
        or not (message is None or type(message) is str)
        or type(warnings) is not tuple
        or type(labels) is not tuple
    ):
        return None
    for w in warnings:
        if (
            type(w) is not Warning
            or not (w.reason is None or type(w.reason) is str)
            or not (w.message is None or type(w.message) is str)
        ):
            return None
    for label in labels:
        if type(label) is not str:
            return None
    # ``_value_``: the member's value without the ``value`` property's descriptor call.
    return (decision._value_, reason, message, warnings, labels)


def gate(raw: Any) -> Verdict:
    """``InterceptionEmitter._invoke``'s §5 gate, verbatim in effect: the SDK's text."""
    try:
        wire = raw.to_wire() if isinstance(raw, Verdict) else raw
        text = _STDLIB.encode(wire)
    except Exception as e:
        return Verdict.host_error(HostError.VERDICT_INVALID, str(e))
    return _gate_text(text)


def _gate_text(text: str) -> Verdict:
    try:
        return Verdict.from_wire(json.loads(_core.validate_verdict(text)))
    except _core.AgentHooksCoreError as e:
        return Verdict.host_error(_host_error_of(e, HostError.VERDICT_INVALID), str(e))
    except Exception as e:
        return Verdict.host_error(HostError.VERDICT_INVALID, str(e))
