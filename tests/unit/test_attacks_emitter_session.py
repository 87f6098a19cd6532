"""The verdict shapes ``HostEmitter``'s sequential/first_deny fast path (0ea6b53) hands over to
the SDK's dispatch, each pinned as an example against agent-hooks-sdk's
``InterceptionEmitter``: the Hypothesis differential reaches them only by chance.

Each case runs allows first (the fast path runs them itself), then the verdict that makes the
SDK take over (its dispatch replays the allows instead of invoking them again): a transform, a
deny, an escalation (approved, rejected, unresolved, a resolver that raises), an interceptor
that raises, times out, returns garbage or forges a host error; and emissions repeated on one
emitter, so the kept outcomes, bindings and summaries are reused. Everything observable must be
byte-identical, and each interceptor invoked exactly once per emission."""

from __future__ import annotations

import pytest
from agent_hooks import (
    CompositionConfig,
    Decision,
    EnforcementMode,
    Transform,
    Verdict,
    Warning,
)
from agent_hooks.composition import OnApproval

from tests.unit.test_emitter_differential import Host, Recipe, Resolution, Step, both

ALLOW = Step("verdict", Verdict.allow())
ALLOW_ASYNC = Step("verdict", Verdict.allow(), is_async=True)
ALLOW_READ_ONLY = Step("verdict", Verdict.allow(), read_only=True)
ALLOW_NOTED = Step(
    "verdict",
    Verdict(
        decision=Decision.ALLOW,
        reason="noted",
        warnings=(Warning(reason="w1", message=None),),
        result_labels=("pii",),
    ),
)
TRANSFORM = Step(
    "verdict",
    Verdict(
        decision=Decision.TRANSFORM,
        reason="rewrite",
        transform=Transform(path="$target.a", value=7),
    ),
)
BAD_TRANSFORM = Step(
    "verdict",
    Verdict(
        decision=Decision.TRANSFORM,
        reason="broken",
        transform=Transform(path="$target.missing.deep", value=1),
    ),
)
DENY = Step("verdict", Verdict.deny(reason="no", message="not this"))
ESCALATE = Step("verdict", Verdict.escalate(reason="review", message="a human looks"))
RAISES = Step("raise")
TIMES_OUT = Step("timeout")
GARBAGE = Step("garbage", object())
FORGED = Step("wire", {"decision": "allow", "reason": "host_error:forged"})
MUTATES = Step("mutate")
AT_TOOL = Step("verdict", Verdict.allow(), at=("pre_tool_call",))

SHAPES: dict[str, tuple[Step, ...]] = {
    "allows then a transform": (ALLOW, ALLOW_READ_ONLY, TRANSFORM),
    "allows, a transform, then an allow": (ALLOW, TRANSFORM, ALLOW_ASYNC),
    "allows then a transform that cannot apply": (ALLOW_NOTED, BAD_TRANSFORM, ALLOW),
    "allows then a deny": (ALLOW_NOTED, ALLOW_ASYNC, DENY, ALLOW),
    "allows then an escalation": (ALLOW_NOTED, ALLOW_READ_ONLY, ESCALATE, TRANSFORM),
    "allows then a raise": (ALLOW, ALLOW_NOTED, RAISES, ALLOW),
    "allows then a timeout": (ALLOW_ASYNC, ALLOW_NOTED, TIMES_OUT, ALLOW),
    "allows then garbage": (ALLOW_READ_ONLY, GARBAGE),
    "allows then a forged host error": (ALLOW_NOTED, FORGED, ALLOW),
    "a mutation among allows": (ALLOW_READ_ONLY, MUTATES, ALLOW_READ_ONLY, ALLOW),
    "a mutation then a transform": (MUTATES, TRANSFORM, ALLOW_READ_ONLY),
    "only allows, with unions": (ALLOW_NOTED, ALLOW_ASYNC, ALLOW_NOTED, AT_TOOL),
    "a binding at one point": (AT_TOOL, DENY),
}

RESOLVERS: dict[str, tuple[Resolution, ...] | None] = {
    "no resolver": None,
    "approves": (Resolution("approve", Verdict.allow()), Resolution("approve", Verdict.allow())),
    "rejects": (Resolution("reject", Verdict.deny(reason="nope")),),
    "unresolved": (Resolution("unresolved"),),
    "raises": (Resolution("raise"),),
    "approves with a transform": (
        Resolution(
            "approve",
            Verdict(
                decision=Decision.TRANSFORM,
                reason="edited",
                transform=Transform(path="$target", value={"a": 1}),
            ),
            is_async=True,
        ),
    ),
}

COMPOSITIONS = {
    "first_deny stop": CompositionConfig.default(),
    "first_deny resume": CompositionConfig.first_deny(OnApproval.RESUME),
    # The engine's default (graphs.hooks.governance.DENY_WINS), which takes the fast path too.
    "run_all": CompositionConfig.run_all(),
}


def recipes(points: tuple[str, ...]) -> list[Recipe]:
    """One context per point, on one emitter: the second and third reuse what the first
    emission kept (bindings, allow outcomes, summaries)."""
    return [
        Recipe(
            point=point,
            payload={"note": "hello", "n": i},
            args={"a": 1, "to": "ada@example.com"},
            json_context=i % 2 == 0,
            odd_key=None,
            odd=None,
            drop=None,
            sequence=i,
        )
        for i, point in enumerate(points)
    ]


POINTS = ("pre_tool_call", "pre_tool_call", "post_model_call", "pre_tool_call")


@pytest.mark.parametrize("composition", COMPOSITIONS)
@pytest.mark.parametrize("resolver", RESOLVERS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", [EnforcementMode.ENFORCE, EnforcementMode.EVALUATE_ONLY])
def test_the_fast_path_hands_over_every_verdict_shape_as_the_sdk_decides_it(
    shape: str, resolver: str, composition: str, mode: EnforcementMode
) -> None:
    host = Host(
        mode=mode,
        composition=COMPOSITIONS[composition],
        identity="jcs",
        steps=SHAPES[shape],
        resolutions=RESOLVERS[resolver],
        redact=False,
    )
    sdk, fast = both(host, lambda: [r.build() for r in recipes(POINTS)])
    assert fast == sdk
    # Each interceptor saw each emission bound to it once: a replayed verdict is not a second
    # invocation (what an interceptor with side effects, a counter, a rate limit, would see).
    seen = [line for line in fast if line.startswith("seen ")]
    assert seen == [line for line in sdk if line.startswith("seen ")]


def _approving_host(steps: tuple[Step, ...]) -> Host:
    return Host(
        mode=EnforcementMode.ENFORCE,
        composition=CompositionConfig.default(),
        identity="jcs",
        steps=steps,
        resolutions=(Resolution("approve", Verdict.allow()),),
        redact=False,
    )


@pytest.mark.parametrize("shape", ["allows then a deny", "allows then an escalation"])
def test_an_allowing_interceptor_is_invoked_once_when_a_later_one_decides(shape: str) -> None:
    host = _approving_host(SHAPES[shape])
    _, fast = both(host, lambda: [r.build() for r in recipes(("pre_tool_call",))])
    per_interceptor: dict[str, int] = {}
    for line in fast:
        if line.startswith("seen "):
            index = line.split(" ", 2)[1]
            per_interceptor[index] = per_interceptor.get(index, 0) + 1
    # Up to the deciding one, each ran exactly once; after a deny nothing more runs.
    decider = next(i for i, s in enumerate(SHAPES[shape]) if s in (DENY, ESCALATE))
    assert per_interceptor == {str(i): 1 for i in range(decider + 1)}
