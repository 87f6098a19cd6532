"""The host emitter: agent-hooks-sdk's ``InterceptionEmitter`` contract at a fraction of its cost.

The SDK's emitter, per emission, serializes the context with stdlib ``json`` three times
(envelope check, input identity, record), deep-copies it for every interceptor, sends every
verdict through a JSON round trip and has the core hash the context a second time for the
record. ``HostEmitter`` is a subclass that keeps every decision of the SDK's code (the profile
dispatch, the approval seam, the unions, the failure mapping are inherited, not rewritten) and
changes only how values reach the Rust core (``agent_hooks._core``):

* the context is serialized once, with orjson, and that text serves the envelope check, the
  input identity and the record;
* an interceptor that declares itself read-only (``context_read_only = True``, as
  ``approvals.policy.Policy`` does) reads the context itself; any other gets its own copy, made
  the way ``copy.deepcopy`` would make it;
* a verdict is still checked by the core's ``validate_verdict``, but the typed verdict for a
  given wire text (immutable: no approval block, transform or evidence) is kept, so the same
  answer is not parsed again;
* the record's enforced identity is the input identity when no transform changed the context
  (the same JSON value hashes the same), so the core does not hash it twice.

Byte for byte the same records and verdicts as ``InterceptionEmitter`` is the contract, and
``tests/unit/test_emitter_differential.py`` checks it. Everything the fast path cannot prove
equal takes the SDK's own code: a context that is not plain JSON data (a tuple, a NaN, a
``datetime``, a subclass of a JSON type, an integer beyond 64 bits: anything whose orjson text
does not read back equal), a custom identity provider, a core error (its message may quote a
position in the text, so the SDK's text must produce it), a transform (applied by the SDK's
code), and the parallel profiles' snapshots.

``APPROVALS_EMITTER=sdk`` switches back to the SDK's emitter (``emitter_class``).

What passes to and from the core (the context's text, the verdict gate, the record read back)
is ``graphs.hooks.wire``; ``JsonContext`` is importable from here.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from dataclasses import dataclass
from typing import Any, Final

from agent_hooks import (
    JCS_SHA256,
    CompositionConfig,
    CompositionProfile,
    Decision,
    EnforcementMode,
    HostError,
    InterceptionEmitter,
    InterceptionPoint,
    InterceptionRecord,
    Verdict,
    VerdictSummary,
    _core,
)
from agent_hooks.context import AgentContext
from agent_hooks.emitter import (
    IdentityProvider,
    _Bound,
    _is_host_synthesized,
    _Outcome,
    _point_of,
    _summaries,
    _with_unions,
)

from graphs.hooks.wire import (
    GATED,
    POINTS,
    VERDICT_MEMO,
    JsonContext,
    Wire,
    fast_dumps,
    gate,
    key_of,
    loads,
    record_of,
    wire_of,
)

#: The setting that picks the emitter: ``fast`` (``HostEmitter``, the default) or ``sdk``.
EMITTER_SETTING: Final = "APPROVALS_EMITTER"
EMITTER_KINDS: Final = ("fast", "sdk")
#: The attribute an interceptor sets to say it never mutates (nor keeps) the context it reads.
READ_ONLY_ATTRIBUTE: Final = "context_read_only"

#: The profiles whose interceptors run one after another on the one context, each while the
#: ones before it allowed, and what the SDK's dispatch records as ``fold_truncated`` when every
#: one of them allowed (``run_all`` is the engine's default, ``graphs.hooks.governance.DENY_WINS``).
_IN_ORDER: Final = {
    CompositionProfile.SEQUENTIAL_FIRST_DENY: False,
    CompositionProfile.SEQUENTIAL_RUN_ALL: None,
}

#: The provider name the record is finalized under when the enforced identity is supplied
#: (the core hashes the context only for ``jcs-sha256``); the record gets the declared name back.
_SUPPLIED: Final = "approvals-supplied"


def emitter_kind() -> str:
    """Which emitter ``APPROVALS_EMITTER`` asks for (``fast`` unless it says ``sdk``)."""
    kind = os.environ.get(EMITTER_SETTING, "fast").strip().lower() or "fast"
    if kind not in EMITTER_KINDS:
        raise ValueError(f"{EMITTER_SETTING} must be one of {', '.join(EMITTER_KINDS)}: {kind!r}")
    return kind


def emitter_class() -> type[InterceptionEmitter]:
    """The emitter class the setting picks: ``HostEmitter`` or the SDK's ``InterceptionEmitter``."""
    return InterceptionEmitter if emitter_kind() == "sdk" else HostEmitter


def reads_only(interceptor: object) -> bool:
    """Whether ``interceptor`` declared that it never mutates (nor keeps) its context."""
    return getattr(interceptor, READ_ONLY_ATTRIBUTE, False) is True


@dataclass(slots=True)
class _Awaiting:
    """What an interceptor returned to be awaited (``HostEmitter._call``)."""

    awaitable: Any


class HostEmitter(InterceptionEmitter):
    """``InterceptionEmitter`` with one serialization per emission and copies only for
    interceptors that may mutate the context (see the module docstring)."""

    __slots__ = (
        "_active_at",
        "_active_of",
        "_allows",
        "_composition_wire",
        "_wires",
        "_wires_of",
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._wires: dict[int, Wire] = {}
        #: The interceptors bound at each point, for the interceptor list they were read from
        #: (``register`` appends to it; a declaration replaces it).
        self._active_at: dict[InterceptionPoint | None, list[_Bound]] = {}
        self._active_of: tuple[int, int] = (0, -1)
        #: ``to_wire()`` of the (frozen) composition, for the composition it was read from.
        self._composition_wire: tuple[CompositionConfig | None, dict[str, Any]] = (None, {})
        #: ``_allowed``'s outcomes: (verdicts, combined, summaries, decided by) by profile,
        #: names and verdict ids.
        self._allows: dict[
            tuple[Any, ...], tuple[tuple[Verdict, ...], Verdict, Any, int | None]
        ] = {}
        #: ``_summaries_wire``'s lists: (summaries, wire) by the summaries' id.
        self._wires_of: dict[int, tuple[tuple[VerdictSummary, ...], list[dict[str, Any]]]] = {}

    async def emit_unchecked(self, ctx: AgentContext) -> InterceptionRecord:
        """``InterceptionEmitter.emit_unchecked``; a context the fast path cannot carry takes
        the SDK's code whole."""
        if isinstance(self._identity, IdentityProvider) or id(ctx) in self._wires:
            return await super().emit_unchecked(ctx)
        wire = wire_of(ctx)
        if wire is None:
            return await super().emit_unchecked(ctx)
        try:
            _core.validate_envelope(wire.text)
            if self._identity is not None:
                wire.identity = _core.context_identity(wire.text)
        except ValueError:
            # The SDK's text gives the exact error (messages may name a position); nothing has
            # run yet, so the whole emission can be the SDK's.
            return await super().emit_unchecked(ctx)
        self._wires[id(ctx)] = wire
        try:
            try:
                outcome = await self._dispatch(ctx)
            except asyncio.CancelledError:
                cancelled = _Outcome(
                    Verdict.host_error(HostError.INTERCEPTOR_FAILED, "CancelledError")
                )
                self._append(self._finalize(ctx, cancelled, wire.identity))
                raise
            return self._append(self._finalize(ctx, outcome, wire.identity))
        finally:
            del self._wires[id(ctx)]

    def _compute_identity(self, ctx: AgentContext) -> str | None:
        wire = self._wires.get(id(ctx))
        if wire is not None and not wire.stale and wire.identity is not None:
            # The approval seam asks again for the context it is about to present: unchanged,
            # it hashes to the input identity.
            return wire.identity
        return super()._compute_identity(ctx)

    async def _consult(self, ctx: AgentContext, verdict: Verdict) -> tuple[Verdict, bool] | None:
        wire = self._wires.get(id(ctx))
        if wire is not None and self._approval_redactor is not None:
            # A redactor is handed the context itself and may return it: hash what it returns.
            wire.stale = True
        try:
            return await super()._consult(ctx, verdict)
        finally:
            if wire is not None:
                # The resolver was handed the context itself (the SDK hands it the same object):
                # what follows must not assume it is unchanged.
                wire.stale = True

    def _fold_transform(self, ctx: AgentContext, v: Verdict) -> Verdict:
        wire = self._wires.get(id(ctx))
        if wire is not None and self._mode is EnforcementMode.ENFORCE:
            # The SDK's code applies it (its text, its errors); the context is rewritten.
            wire.stale = True
        return super()._fold_transform(ctx, v)

    async def _dispatch(self, ctx: AgentContext) -> _Outcome:
        """The SDK's profile dispatch; under ``sequential/first_deny`` and ``sequential/run_all``
        the interceptors run here while each allows, and an emission every interceptor allowed
        ends as the SDK's dispatch ends it. At the first verdict that is not an allow, the SDK's
        dispatch takes over, handed the verdicts already had (``Wire.replay``) in place of
        invoking those interceptors again, so everything it decides is its own code's."""
        wire = self._wires.get(id(ctx))
        profile = self._composition.profile
        if wire is None or profile not in _IN_ORDER:
            return await super()._dispatch(ctx)
        active = self._active(ctx)
        if not active:
            return await super()._dispatch(ctx)
        had: list[Verdict] = []
        for bound in active:
            answer = self._call(bound, ctx, wire)
            verdict = await self._settle(bound, answer) if isinstance(answer, _Awaiting) else answer
            had.append(verdict)
            if verdict.decision is not Decision.ALLOW or _is_host_synthesized(verdict):
                wire.replay = had
                return await super()._dispatch(ctx)
        return await self._allowed(ctx, had, active, profile)

    async def _allowed(
        self,
        ctx: AgentContext,
        had: list[Verdict],
        active: list[_Bound],
        profile: CompositionProfile,
    ) -> _Outcome:
        """A sequential profile's outcome when every interceptor allowed: an allow, nothing
        resolved. Under ``sequential/first_deny`` the SDK's loop makes it (an allow with the
        §7.3 unions, decided by none, nothing truncated); under ``sequential/run_all`` its
        aggregation does (in the core, which keeps the first allow's reason), called here.

        Interceptors answer with few distinct verdicts, and the gate hands out one shared
        (frozen) verdict per immutable answer (``_checked``), so the outcome's combined verdict
        and summaries (frozen too) are kept for the profile, verdicts and names they were made
        from."""
        names = tuple(b.name for b in active)
        key = (profile, names, *map(id, had))
        known = self._allows.get(key)
        if known is not None and all(a is b for a, b in zip(known[0], had, strict=True)):
            return _Outcome(known[1], known[3], known[2], _IN_ORDER[profile], None)
        if profile is CompositionProfile.SEQUENTIAL_FIRST_DENY:
            combined = _with_unions(Verdict(decision=Decision.ALLOW), had)
            summaries, decided_by = _summaries(had, list(names)), None
        else:
            # Nothing to consult nor to apply when every verdict allows: a function of them.
            aggregated = await self._aggregate_and_consult(ctx, had, active)
            combined, summaries = aggregated.combined, aggregated.verdicts
            decided_by = aggregated.decided_by
        if len(self._allows) >= VERDICT_MEMO:
            self._allows.clear()
        # The verdicts are kept alive with the entry, so their ids in the key stay theirs.
        self._allows[key] = (tuple(had), combined, summaries, decided_by)
        return _Outcome(combined, decided_by, summaries, _IN_ORDER[profile], None)

    async def _invoke(self, bound: _Bound, ctx: AgentContext) -> Verdict:
        wire = self._wires.get(id(ctx))
        if wire is None:
            return await super()._invoke(bound, ctx)
        if wire.replay:
            # The SDK's dispatch, taking over: the verdicts this emission already had.
            return wire.replay.pop(0)
        answer = self._call(bound, ctx, wire)
        return await self._settle(bound, answer) if isinstance(answer, _Awaiting) else answer

    def _call(self, bound: _Bound, ctx: AgentContext, wire: Wire) -> Verdict | _Awaiting:
        """``InterceptionEmitter._invoke`` up to the await: the gated verdict of an interceptor
        that answered at once, or what it returned to be awaited."""
        interceptor = bound.interceptor
        try:
            # §7 isolation: a copy for whoever may mutate it; a read-only interceptor reads
            # the context itself (it is plain JSON data, equal to any copy of it).
            raw = interceptor.intercept(ctx if reads_only(interceptor) else wire.copy_of(ctx))
            if type(raw) is not Verdict and inspect.isawaitable(raw):
                return _Awaiting(raw)
        except TimeoutError:
            return Verdict.host_error(HostError.INTERCEPTOR_TIMEOUT)
        except Exception as e:
            return Verdict.host_error(HostError.INTERCEPTOR_FAILED, type(e).__name__)
        return self._checked(raw)

    async def _settle(self, bound: _Bound, answer: _Awaiting) -> Verdict:
        """The rest of ``InterceptionEmitter._invoke`` for an awaitable answer: awaited within
        the interceptor's timeout, then gated."""
        limit = self._timeout if bound.inherit_timeout else bound.timeout
        try:
            if limit is not None:
                raw = await asyncio.wait_for(answer.awaitable, limit)
            else:
                raw = await answer.awaitable
        except TimeoutError:
            return Verdict.host_error(HostError.INTERCEPTOR_TIMEOUT)
        except Exception as e:
            return Verdict.host_error(HostError.INTERCEPTOR_FAILED, type(e).__name__)
        return self._checked(raw)

    def _checked(self, raw: Any) -> Verdict:
        """The §5 gate for one interceptor's answer, as ``InterceptionEmitter._invoke`` runs it.

        An immutable verdict (only strings, no approval block, transform or evidence) has one
        wire text per value of its fields, and the gate is a function of that text: its outcome
        is kept by those values."""
        key = key_of(raw)
        if key is None:
            return gate(raw)
        known = GATED.get(key)
        if known is not None:
            return known
        verdict = gate(raw)
        if verdict.approval is None and verdict.transform is None and verdict.evidence is None:
            # Immutable (frozen, tuples of frozen values): sharing it is unobservable.
            if len(GATED) >= VERDICT_MEMO:
                GATED.clear()
            GATED[key] = verdict
        return verdict

    def _active(self, ctx: AgentContext) -> list[_Bound]:
        # A copy: the caller owns its list, as with the SDK's.
        return list(self._bound_at(ctx))

    def _bound_at(self, ctx: AgentContext) -> list[_Bound]:
        """The interceptors bound at the context's point, kept per point for the interceptor
        list they were read from (not to be changed by the caller)."""
        point = ctx.get("interception_point")
        at = POINTS.get(point) if type(point) is str else _point_of(ctx)
        bounds = self._interceptors
        if self._active_of != (id(bounds), len(bounds)):
            self._active_at.clear()
            self._active_of = (id(bounds), len(bounds))
        active = self._active_at.get(at)
        if active is None:
            active = self._active_at[at] = [b for b in bounds if b.runs_at(at)]
        return active

    def _summaries_wire(self, summaries: tuple[VerdictSummary, ...]) -> list[dict[str, Any]]:
        """``[s.to_wire() for s in summaries]``, kept for the (frozen) summaries ``_allowed``
        hands out again; only read (serialized, compared), never changed."""
        known = self._wires_of.get(id(summaries))
        if known is not None and known[0] is summaries:
            return known[1]
        wired = [s.to_wire() for s in summaries]
        if len(self._wires_of) >= VERDICT_MEMO:
            self._wires_of.clear()
        # The summaries are kept alive with the entry, so their id in the key stays theirs.
        self._wires_of[id(summaries)] = (summaries, wired)
        return wired

    def _composition_to_wire(self) -> dict[str, Any]:
        composition, wired = self._composition_wire
        if composition is not self._composition:
            wired = self._composition.to_wire()
            self._composition_wire = (self._composition, wired)
        return dict(wired)

    def _finalize(
        self, ctx: AgentContext, outcome: _Outcome, input_identity: str | None
    ) -> InterceptionRecord:
        wire = self._wires.get(id(ctx))
        if wire is None:
            return super()._finalize(ctx, outcome, input_identity)
        declared = self._provider_name()
        provider = declared
        enforced: str | None = None
        if declared == JCS_SHA256 and not wire.stale and input_identity is not None:
            # Nothing rewrote the context: its enforced identity is its input identity.
            provider, enforced = _SUPPLIED, input_identity
        options: dict[str, Any] = {
            "input_identity": input_identity,
            "identity_provider": provider,
            "enforced_identity": enforced,
            "decided_by": outcome.decided_by,
            "composition": self._composition_to_wire(),
            "verdicts": self._summaries_wire(outcome.verdicts),
            "fold_truncated": outcome.fold_truncated,
            "resolved_by": outcome.resolved_by,
            "interceptors_registered": len(self._bound_at(ctx)),
        }
        self._stamp_declaration(options)
        combined = outcome.combined.to_wire()
        try:
            text = wire.text if not wire.stale else fast_dumps(dict(ctx))
            record_json = _core.finalize(
                text, fast_dumps(combined), self._mode.value, fast_dumps(options)
            )
        except ValueError:
            # The SDK's code, with its text, for whatever the core refuses.
            return super()._finalize(ctx, outcome, input_identity)
        return record_of(
            loads(record_json), declared, outcome, combined, options, self._composition
        )


__all__ = [
    "EMITTER_KINDS",
    "EMITTER_SETTING",
    "READ_ONLY_ATTRIBUTE",
    "HostEmitter",
    "JsonContext",
    "emitter_class",
    "emitter_kind",
    "reads_only",
]
