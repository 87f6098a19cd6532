"""``HostEmitter`` against agent-hooks-sdk's ``InterceptionEmitter``, on the same inputs.

Hypothesis generates a host configuration (mode, composition, identity provider, approval
redactor, per-point bindings), one script per interceptor (a verdict object or a wire dict,
valid or not, transforms on good and bad paths, liftable denies, garbage, a raise, a timeout,
an in-place mutation, sync or async, declared read-only or not), an approval resolver's script
(approve, reject, unresolved, an identity that does not echo, a raise, a timeout) and a few
contexts (from the SDK's builder, as plain dicts or ``JsonContext``; some broken: NaN, an
integer beyond 2^53 or 64 bits, a tuple, a datetime, a non-string key, no ``spec``, an unknown
point). Both emitters run the same scripts on their own copies; everything observable must be
byte-identical: each record's wire JSON, what ``emit`` returned or raised (type, message and
record), the context after the emission (transforms write back), what each interceptor was
handed, and every approval request (identity, point, verdict, context).

Nothing is normalized: the contexts carry a fixed timestamp, so the records carry it too.
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import hashlib
import json
import selectors
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent_hooks import (
    AgentContextBuilder,
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalResolution,
    CompositionConfig,
    Decision,
    EnforcementMode,
    InterceptionBlocked,
    InterceptionEmitter,
    InterceptionPoint,
    Transform,
    Verdict,
    Warning,
)
from agent_hooks.composition import OnApproval, SynthesisPolicy
from agent_hooks.emitter import IdentityProvider
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphs.hooks.emitter import HostEmitter, JsonContext

TIMEOUT = 0.05
TIMESTAMP = "2026-01-01T00:00:00.000000Z"


# -- what every run is compared by -------------------------------------------------------


def shape(value: Any) -> Any:
    """``value`` as JSON that keeps what JSON would lose: container types, float spellings
    (NaN), and anything that is not JSON at all (by type and repr)."""
    if value is None or type(value) in (bool, str):
        return value
    if type(value) is int:
        return value if abs(value) < 2**53 else {"int": str(value)}
    if type(value) is float:
        return {"float": repr(value)}
    if isinstance(value, dict):
        return {
            "dict": type(value).__name__,
            "items": [[shape(k), shape(v)] for k, v in value.items()],
        }
    if isinstance(value, list | tuple):
        return {"seq": type(value).__name__, "items": [shape(v) for v in value]}
    return {"other": type(value).__name__, "repr": repr(value)}


def canonical(value: Any) -> str:
    return json.dumps(shape(value), sort_keys=True)


# -- scripted interceptors and resolver -------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One interceptor's behaviour: ``kind`` is verdict | wire | garbage | raise | timeout |
    mutate; ``answer`` what it returns."""

    kind: str
    answer: Any = None
    is_async: bool = False
    read_only: bool = False
    at: tuple[str, ...] | None = None


class Scripted:
    """Plays a ``Step``; keeps the canonical form of every context it was handed."""

    def __init__(self, step: Step, seen: list[str]) -> None:
        self.step = step
        self.seen = seen
        self.context_read_only = step.read_only

    def intercept(self, context: dict[str, Any], /) -> Any:
        # A read-only interceptor may be handed the context itself rather than a copy: the one
        # difference it could see is the class of the top-level mapping (JsonContext or dict).
        self.seen.append(canonical(dict(context) if self.step.read_only else context))
        if self.step.is_async or self.step.kind == "timeout":
            return self._later(context)
        return self._now(context)

    async def _later(self, context: dict[str, Any]) -> Any:
        if self.step.kind == "timeout":
            # Past the emitter's timeout, the point of this script (InstantTimeoutLoop: it
            # costs no wall time).
            await asyncio.sleep(TIMEOUT * 20)
        await asyncio.sleep(0)
        return self._now(context)

    def _now(self, context: dict[str, Any]) -> Any:
        kind = self.step.kind
        if kind == "raise":
            raise LookupError("scripted failure")
        if kind == "mutate":
            context["target"] = "TAMPERED"
            if isinstance(context.get("tool_call"), dict):
                context["tool_call"]["args"] = {"tampered": True}
            context.pop("spec", None)
            return Verdict.allow()
        return self.step.answer


@dataclass
class Resolution:
    """One answer of the scripted resolver: ``kind`` is approve | reject | unresolved |
    mismatch | raise | timeout; ``verdict`` what it carries."""

    kind: str
    verdict: Verdict | None = None
    is_async: bool = False


@dataclass
class ScriptedResolver:
    script: list[Resolution]
    requests: list[str] = field(default_factory=list)

    def resolve(self, request: ApprovalRequest, /) -> Any:
        self.requests.append(
            json.dumps(
                {
                    "identity": request.context_identity,
                    "point": request.interception_point.value,
                    "verdict": request.verdict.to_wire(),
                    "context": shape(request.context),
                },
                sort_keys=True,
            )
        )
        answer = self.script.pop(0) if self.script else Resolution("unresolved")
        if answer.is_async or answer.kind == "timeout":
            return self._later(request, answer)
        return self._answer(request, answer)

    async def _later(self, request: ApprovalRequest, answer: Resolution) -> ApprovalResolution:
        if answer.kind == "timeout":
            await asyncio.sleep(TIMEOUT * 20)  # past the timeout, as above
        return self._answer(request, answer)

    def _answer(self, request: ApprovalRequest, answer: Resolution) -> ApprovalResolution:
        if answer.kind == "raise":
            raise KeyError("scripted resolver failure")
        identity = request.context_identity
        if answer.kind == "mismatch":
            identity = "sha256:" + "0" * 64
        if answer.kind == "unresolved":
            return ApprovalResolution(ApprovalOutcome.UNRESOLVED, identity)
        outcome = ApprovalOutcome.APPROVE if answer.kind == "approve" else ApprovalOutcome.REJECT
        if answer.kind == "mismatch":
            outcome = ApprovalOutcome.APPROVE
        return ApprovalResolution(outcome, identity, answer.verdict or Verdict.allow())


def custom_identity(ctx: dict[str, Any]) -> str:
    text = json.dumps(shape(ctx), sort_keys=True)
    if "boom" in text:
        raise RuntimeError("provider fault")
    return "custom:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def redactor(ctx: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in ctx.items() if k != "target"}
    out["target"] = "[redacted]"
    if "explode" in json.dumps(shape(ctx.get("target"))):
        raise ValueError("redactor fault")
    return out


@dataclass(frozen=True)
class Host:
    mode: EnforcementMode
    composition: CompositionConfig
    identity: str
    steps: tuple[Step, ...]
    resolutions: tuple[Resolution, ...] | None
    redact: bool


@dataclass
class Run:
    emitter: InterceptionEmitter
    seen: list[list[str]]
    resolver: ScriptedResolver | None


def build(kind: type[InterceptionEmitter], host: Host) -> Run:
    resolver = (
        ScriptedResolver([Resolution(r.kind, r.verdict, r.is_async) for r in host.resolutions])
        if host.resolutions is not None
        else None
    )
    identity: str | IdentityProvider | None = {
        "jcs": "jcs-sha256",
        "none": None,
        "custom": IdentityProvider("custom", custom_identity),
    }[host.identity]
    emitter = kind(
        mode=host.mode,
        resolver=resolver,
        timeout=TIMEOUT,
        composition=host.composition,
        identity_provider=identity,
    )
    seen: list[list[str]] = []
    for i, step in enumerate(host.steps):
        seen.append([])
        emitter.register(Scripted(step, seen[-1]), name=f"scripted-{i}", at=step.at)
    if host.redact:
        emitter.set_approval_redactor(redactor)
    return Run(emitter, seen, resolver)


async def observe(run: Run, contexts: list[dict[str, Any]]) -> list[str]:
    """Everything observable of emitting ``contexts`` in order, one line each."""
    out: list[str] = []
    for ctx in contexts:
        try:
            result = await run.emitter.emit(ctx)
        except InterceptionBlocked as blocked:
            out.append(f"blocked {blocked} {json.dumps(blocked.result.to_wire(), sort_keys=True)}")
        except Exception as exc:
            out.append(f"raised {type(exc).__name__}: {exc}")
        else:
            out.append(f"proceeds {json.dumps(result.record.to_wire(), sort_keys=True)}")
            out.append(f"target {canonical(result.target)}")
        out.append(f"context {canonical(ctx)}")
    out.extend(f"record {json.dumps(r.to_wire(), sort_keys=True)}" for r in run.emitter.results)
    out.extend(f"seen {i} {text}" for i, seen in enumerate(run.seen) for text in seen)
    if run.resolver is not None:
        out.extend(f"asked {text}" for text in run.resolver.requests)
    return out


class SkippingSelector(selectors.DefaultSelector):
    """A selector that, with nothing ready, moves its loop's clock to the next timer instead of
    sleeping until it: see ``instant_timeouts``."""

    def __init__(self) -> None:
        super().__init__()
        self.skipped = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0 if timeout is not None else None)
        if not ready and timeout is not None and timeout > 0:
            self.skipped += timeout
        return ready


class InstantTimeoutLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock jumps over idle waits: an interceptor or resolver that times out
    (it sleeps ``TIMEOUT * 20``, the emitter gives up after ``TIMEOUT``) costs no wall time, and
    the order of events is the real loop's (the emitter's timeout still fires first). A wait
    that is not idle is never skipped: the clock moves only when nothing is ready to run, so
    a scripted answer due now is never taken for a timeout, however loaded the machine."""

    def __init__(self) -> None:
        self._skipping = SkippingSelector()
        super().__init__(self._skipping)

    def time(self) -> float:
        return super().time() + self._skipping.skipped


def both(host: Host, make_contexts: Callable[[], list[dict[str, Any]]]) -> tuple[list[str], ...]:
    async def go() -> tuple[list[str], list[str]]:
        sdk = await observe(build(InterceptionEmitter, host), make_contexts())
        fast = await observe(build(HostEmitter, host), make_contexts())
        return sdk, fast

    with asyncio.Runner(loop_factory=InstantTimeoutLoop) as runner:
        return runner.run(go())


# -- strategies --------------------------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "to", "amount", "note", "é", "k\u2028", "😀"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53) + 1, 2**53 - 1),
    st.sampled_from([0, -1, 2**31, 2**53 - 1]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e16, 1e-7, -0.0, 0.1, 1.0, 123456789.125, 5e-324, 1.7976931348623157e308]),
    st.text(max_size=12),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=12,
)
ARGS = st.dictionaries(KEYS, JSON, max_size=4)


class Color(enum.Enum):
    RED = "red"


class Tag(str):
    pass


#: Values a context must not hold, or holds in a form JSON does not have.
ODD = st.sampled_from(
    [
        float("nan"),
        float("inf"),
        2**53 + 1,
        2**64 + 7,
        -(2**63) - 1,
        (1, 2),
        datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
        Color.RED,
        Tag("tagged"),
        {1: "int key"},
        "\ud800",
        "boom",
        "explode",
    ]
)

POINTS = [p.value for p in InterceptionPoint]
PATHS = st.sampled_from(
    [
        "$target",
        "$target.a",
        "$target.to",
        "$target[0]",
        "$target.missing.deep",
        "$policy_target",
        "$target.amount",
        "$targetx",
        "target",
    ]
)


# The strategies a composite draws from are built once, here: built inside it, each draw made
# new strategy objects that Hypothesis validated again, and generating the examples took most of
# the test's time.
DECISIONS = st.sampled_from(["allow", "deny", "transform", "escalate"])
REASONS = st.none() | st.sampled_from(["r1", "r2", "policy_error", "é"])
MESSAGES = st.none() | st.text(max_size=8)
WARNINGS = st.lists(
    st.builds(Warning, reason=st.none() | st.sampled_from(["w1", "w2"]), message=st.none()),
    max_size=2,
)
LABELS = st.lists(st.sampled_from(["pii", "ok", "x"]), max_size=2)
TRANSFORM_PATHS = PATHS.filter(lambda p: p.startswith("$"))
APPROVALS = st.dictionaries(st.sampled_from(["rule", "approvers"]), JSON, max_size=2)


@st.composite
def verdicts(draw: st.DrawFn, *, liftable: bool = True) -> Verdict:
    decision = draw(DECISIONS)
    reason = draw(REASONS)
    message = draw(MESSAGES)
    warnings = tuple(draw(WARNINGS))
    labels = tuple(draw(LABELS))
    if decision == "transform":
        return Verdict(
            decision=Decision.TRANSFORM,
            reason=reason,
            message=message,
            warnings=warnings,
            result_labels=labels,
            transform=Transform(path=draw(TRANSFORM_PATHS), value=draw(JSON)),
        )
    if decision == "escalate" and liftable:
        approval = draw(APPROVALS)
        return Verdict(
            decision=Decision.DENY,
            reason=reason,
            message=message,
            warnings=warnings,
            approval=approval,
        )
    kind = Decision.ALLOW if decision == "allow" else Decision.DENY
    return Verdict(
        decision=kind, reason=reason, message=message, warnings=warnings, result_labels=labels
    )


VERDICTS = verdicts()
UNLIFTABLE_VERDICTS = verdicts(liftable=False)

WIRES = st.one_of(
    st.builds(lambda v: v.to_wire(), VERDICTS),
    st.fixed_dictionaries(
        {"decision": st.sampled_from(["allow", "deny", "transform", "warn", "escalate", 3])},
        optional={
            "reason": st.sampled_from(["host_error:forged", "r", 7]),
            "message": st.sampled_from(["m", None, ["x"]]),
            "approval": st.sampled_from([{}, {"rule": "r"}, "yes"]),
            "transform": st.sampled_from(
                [{"path": "$target"}, {"path": "$target", "value": 1}, {"value": 2}, "x"]
            ),
            "warnings": st.sampled_from(
                [[{"reason": "host_error:x"}], "w", [1], [{"reason": "ok"}]]
            ),
            "result_labels": st.sampled_from([["a"], [1], "a"]),
            "evidence": st.sampled_from(
                [{"artefact": "a"}, "e", {"verification_pointers": {"k": "v"}}]
            ),
            "extra": st.just(float("nan")),
        },
    ),
)
GARBAGE = st.sampled_from([None, 42, "allow", ["allow"], {"decision": float("nan")}, object()])


STEP_KINDS = st.sampled_from(
    ["verdict"] * 6 + ["wire"] * 2 + ["garbage", "raise", "timeout", "mutate"]
)
AT = (
    st.none()
    | st.none()
    | st.lists(st.sampled_from(POINTS), min_size=1, max_size=4, unique=True).map(tuple)
)


@st.composite
def steps(draw: st.DrawFn) -> Step:
    kind = draw(STEP_KINDS)
    answer: Any = None
    if kind == "verdict":
        answer = draw(VERDICTS)
    elif kind == "wire":
        answer = draw(WIRES)
    elif kind == "garbage":
        answer = draw(GARBAGE)
    at = draw(AT)
    return Step(
        kind=kind,
        answer=answer,
        is_async=draw(st.booleans()),
        read_only=kind != "mutate" and draw(st.booleans()),
        at=at,
    )


COMPOSITIONS = st.sampled_from(
    [
        CompositionConfig.default(),
        CompositionConfig.first_deny(OnApproval.RESUME),
        CompositionConfig.run_all(),
        CompositionConfig.strictest(),
        CompositionConfig.strictest(SynthesisPolicy.APPROVAL),
        CompositionConfig.unanimous(),
        CompositionConfig.unanimous(SynthesisPolicy.APPROVAL, SynthesisPolicy.APPROVAL),
    ]
)


RESOLUTION_KINDS = st.sampled_from(
    ["approve"] * 4 + ["reject"] * 2 + ["unresolved", "mismatch", "raise", "timeout"]
)
RESOLVED_VERDICTS = (
    st.sampled_from([Verdict.allow(), Verdict.deny(reason="no")]) | UNLIFTABLE_VERDICTS
)


@st.composite
def resolutions(draw: st.DrawFn) -> Resolution:
    kind = draw(RESOLUTION_KINDS)
    verdict = None
    if kind in {"approve", "reject", "mismatch"}:
        verdict = draw(RESOLVED_VERDICTS)
    return Resolution(kind, verdict, draw(st.booleans()))


MODES = st.sampled_from([EnforcementMode.ENFORCE] * 3 + [EnforcementMode.EVALUATE_ONLY])
IDENTITIES = st.sampled_from(["jcs"] * 4 + ["none", "custom"])
STEP_LISTS = st.lists(steps(), min_size=0, max_size=5)
RESOLUTION_LISTS = st.none() | st.lists(resolutions(), max_size=3).map(tuple)


@st.composite
def hosts(draw: st.DrawFn) -> Host:
    return Host(
        mode=draw(MODES),
        composition=draw(COMPOSITIONS),
        identity=draw(IDENTITIES),
        steps=tuple(draw(STEP_LISTS)),
        resolutions=draw(RESOLUTION_LISTS),
        redact=draw(st.booleans()),
    )


@dataclass(frozen=True)
class Recipe:
    """How to build one context, twice, identically: a builder point and its payload, whether
    it is a ``JsonContext``, and an optional breakage (a key set to an odd value or removed)."""

    point: str
    payload: Any
    args: dict[str, Any]
    json_context: bool
    odd_key: str | None
    odd: Any
    drop: str | None
    sequence: int

    def build(self) -> dict[str, Any]:
        b = AgentContextBuilder(agent_id="diff", framework="test", session_id="session-1").with_l2(
            actor={"id": "ann", "kind": "human"}
        )
        payload = json.loads(json.dumps(self.payload))
        args = json.loads(json.dumps(self.args))
        ctx: dict[str, Any]
        match self.point:
            case "agent_startup":
                ctx = b.agent_startup(tools_registered=["add", "send"])
            case "input":
                ctx = b.input(content=payload)
            case "pre_model_call":
                ctx = b.pre_model_call(
                    model_id="m", messages=[{"role": "user", "content": payload}]
                )
            case "post_model_call":
                ctx = b.post_model_call(
                    model_id="m",
                    content=payload,
                    tool_calls=[{"id": "c1", "name": "add", "args": args}],
                    finish_reason="tool_calls",
                )
            case "pre_tool_call":
                ctx = b.pre_tool_call(call_id="c1", name="add", args=args)
            case "post_tool_call":
                ctx = b.post_tool_call(call_id="c1", name="add", args=args, value=payload)
            case "output":
                ctx = b.output(content=payload)
            case _:
                ctx = b.agent_shutdown(reason="completed")
        ctx["timestamp"] = TIMESTAMP
        ctx["sequence"] = self.sequence
        if self.odd_key is not None:
            holder = ctx["target"] if isinstance(ctx.get("target"), dict) else ctx
            holder[self.odd_key] = self.odd
        if self.drop is not None:
            ctx.pop(self.drop, None)
        return JsonContext(ctx) if self.json_context else ctx


BREAKAGES = st.integers(0, 5)
ODD_KEYS = st.sampled_from(["odd", "interception_point", "sequence"])
ODD_VALUES = ODD | st.sampled_from(["nowhere", -1])
DROPS = st.none() | st.sampled_from(["spec", "session", "target"])


@st.composite
def recipes(draw: st.DrawFn, sequence: int) -> Recipe:
    broken = draw(BREAKAGES) == 0
    return Recipe(
        point=draw(st.sampled_from(POINTS)),
        payload=draw(JSON),
        args=draw(ARGS),
        json_context=draw(st.booleans()),
        odd_key=draw(ODD_KEYS) if broken else None,
        odd=draw(ODD_VALUES) if broken else None,
        drop=draw(DROPS) if broken else None,
        sequence=sequence,
    )


HOSTS = hosts()
RECIPES = [recipes(i) for i in range(3)]


@st.composite
def runs(draw: st.DrawFn) -> tuple[Host, list[Recipe]]:
    host = draw(HOSTS)
    count = draw(st.integers(1, 3))
    return host, [draw(RECIPES[i]) for i in range(count)]


@settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(runs())
def test_host_emitter_is_byte_identical_to_the_sdk_emitter(case: tuple[Host, list[Recipe]]) -> None:
    host, contexts = case
    sdk, fast = both(host, lambda: [r.build() for r in contexts])
    assert fast == sdk
