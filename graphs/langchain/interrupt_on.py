"""``interrupt_on`` as ``ApprovalMiddleware`` reads it (``graphs.langchain.middleware``): which
tool's calls wait for a human, the interceptor that asks, and the governance assembled from it, a
policy and a given ``Governance``. What this engine cannot honour is refused when the agent is
built."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_hooks import Decision, Interceptor, Verdict

from approvals.model import DECISION_TYPES, DEFAULT_DECISIONS
from approvals.policy import Policy, load_policy
from graphs.hooks.governance import Governance

DECISIONS = frozenset({"approve", "edit", "reject", "respond"})


@dataclass(frozen=True, kw_only=True, slots=True)
class Gate:
    """One ``interrupt_on`` entry: the call waits for a human."""

    allow_edit: bool
    #: A text, or HumanInTheLoopMiddleware's description factory ``(tool_call, state,
    #: runtime) -> str``, evaluated by the tool seam for each call (``CallGate``).
    description: str | Callable[..., str] | None
    #: The decisions the approver may make, in the HumanInTheLoopMiddleware vocabulary.
    allowed_decisions: tuple[str, ...] = DEFAULT_DECISIONS
    #: HumanInTheLoopMiddleware's ``when`` predicate (a ``ToolCallRequest`` -> ``bool``): the
    #: tool seam evaluates it for each call; a call it was not evaluated for is asked about.
    when: Callable[..., bool] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class CallGate:
    """What the tool seam worked out for one call's gate: whether ``when`` let it through
    without a question, and the description its factory gave."""

    call_id: str
    skip: bool = False
    description: str | None = None
    when_asked: bool = False


_CALL_GATE: ContextVar[CallGate | None] = ContextVar("approvals_call_gate", default=None)


@contextmanager
def call_gate(gate: CallGate | None) -> Iterator[None]:
    """Within this block, ``InterruptOn`` reads ``gate`` for the call it names."""
    token = _CALL_GATE.set(gate)
    try:
        yield
    finally:
        _CALL_GATE.reset(token)


def gates(interrupt_on: Mapping[str, Any]) -> dict[str, Gate]:
    """``interrupt_on`` read the way ``HumanInTheLoopMiddleware`` reads it; what this engine
    cannot honour is refused here, when the agent is built, never after an approval."""
    gates: dict[str, Gate] = {}
    for name, entry in interrupt_on.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"interrupt_on: a tool name must be a non-empty string, not {name!r}")
        if entry is False:
            continue
        if entry is True:
            # Every decision, as HumanInTheLoopMiddleware reads True (respond included).
            gates[name] = Gate(allow_edit=True, description=None, allowed_decisions=DECISION_TYPES)
            continue
        if not isinstance(entry, Mapping):
            raise TypeError(
                f"interrupt_on[{name!r}] must be True, False or a mapping with "
                f"allowed_decisions, not {type(entry).__name__}"
            )
        unknown = set(entry) - {"allowed_decisions", "description", "args_schema", "when"}
        if unknown:
            raise ValueError(
                f"interrupt_on[{name!r}]: unknown key(s) {', '.join(sorted(unknown))}; "
                "expected allowed_decisions, description, args_schema or when"
            )
        when = entry.get("when")
        if when is not None and not callable(when):
            raise TypeError(f"interrupt_on[{name!r}].when must be a callable")
        allowed = entry.get("allowed_decisions")
        if not isinstance(allowed, list | tuple) or not allowed or not set(allowed) <= DECISIONS:
            raise ValueError(
                f"interrupt_on[{name!r}].allowed_decisions must be a non-empty list of "
                f"{', '.join(sorted(DECISIONS))}"
            )
        description = entry.get("description")
        if (
            description is not None
            and not isinstance(description, str)
            and not callable(description)
        ):
            raise TypeError(f"interrupt_on[{name!r}].description must be a string or a callable")
        # A factory's text is fixed when the request is first recorded: the request keeps
        # what the approver was shown, whatever the factory says on resume.
        gates[name] = Gate(
            allow_edit="edit" in allowed,
            description=description,
            allowed_decisions=tuple(d for d in DECISION_TYPES if d in allowed),
            when=when,
        )
    return gates


class InterruptOn:
    """At ``pre_tool_call``, a call of a tool named in ``interrupt_on`` is a liftable deny:
    a human decides it, with the edit permission its ``allowed_decisions`` give."""

    def __init__(
        self, gates: Mapping[str, Gate], prefix: str, *, sensitive_escalates: bool = False
    ) -> None:
        self._gates = dict(gates)
        self._prefix = prefix
        self._sensitive_escalates = sensitive_escalates

    def intercept(self, context: dict[str, Any], /) -> Verdict:
        if context.get("interception_point") != "pre_tool_call":
            return Verdict.allow()
        name = context.get("tool_call", {}).get("name")
        gate = self._gates.get(name) if isinstance(name, str) else None
        if gate is None and self._sensitive_escalates and _marked_sensitive(context):
            # A governed tool marked sensitive, with no policy to decide: as build_agent does.
            gate = Gate(allow_edit=True, description=None)
        if gate is None:
            return Verdict.allow()
        seen = _CALL_GATE.get()
        if seen is not None and seen.call_id != context.get("tool_call", {}).get("id"):
            seen = None
        if seen is not None and seen.skip:
            # ``when`` said this call needs no question (evaluated on our side, per call).
            return Verdict.allow()
        described = seen.description if seen is not None else None
        if described is None and isinstance(gate.description, str):
            described = gate.description
        approval: dict[str, Any] = {
            "allow_edit": gate.allow_edit,
            "allowed_decisions": list(gate.allowed_decisions),
        }
        if gate.when is not None:
            # Recorded with the request: the approver sees that the predicate asked, and a
            # call whose predicate was never evaluated is asked about (fail closed).
            approval["rule"] = (
                f"interrupt_on[{name}].when"
                if seen is not None and seen.when_asked
                else f"interrupt_on[{name}].when (not evaluated: asked)"
            )
        return Verdict(
            decision=Decision.DENY,
            reason="interrupt_on",
            message=described or f"{self._prefix}: {name}",
            approval=approval,
        )


def _marked_sensitive(context: dict[str, Any]) -> bool:
    extensions = (context.get("extensions") or {}).get("approvals") or {}
    tool = extensions.get("tool") if isinstance(extensions, dict) else None
    return isinstance(tool, dict) and tool.get("sensitive") is True


def governance(
    gates: Mapping[str, Gate],
    prefix: str,
    policy: str | Path | Policy | None,
    governance: Governance | None,
) -> Governance:
    """The policy first, then the given governance's interceptors, ``interrupt_on`` last.

    Under the governance's composition (``graphs.hooks.governance.DENY_WINS`` unless it names
    another) every interceptor answers before anyone is asked: a policy's deny, or a given
    interceptor's, wins and no one is asked to approve the call; a policy's escalation (its
    approvers, its deadline) is the one a human decides; ``interrupt_on`` asks only when
    nothing before it denies. Last matters under an explicit ``sequential/first_deny`` too,
    whose approved escalation skips what follows it: an ``interrupt_on`` approval never skips
    the policy."""
    interceptors: list[Interceptor] = []
    names: list[str] = []
    if policy is not None:
        loaded = load_policy(policy) if isinstance(policy, str | Path) else policy
        if not isinstance(loaded, Policy):
            raise TypeError(
                f"policy must be a path or a loaded Policy, not {type(policy).__name__}"
            )
        interceptors.append(loaded)
        names.append(f"policy:{Path(policy).stem}" if isinstance(policy, str | Path) else "policy")
    if governance is not None:
        if governance.emitter is not None and (policy is not None or gates):
            raise ValueError(
                "governance builds its own emitter: give interrupt_on and policy to it, not here"
            )
        interceptors.extend(governance.interceptors)
        names.extend(
            governance.names[i]
            if i < len(governance.names)
            else f"{type(interceptor).__name__}#{i}"
            for i, interceptor in enumerate(governance.interceptors)
        )
    alone = policy is None and governance is None
    if gates or alone:
        # Also alone, with no tool named: an emitter with no interceptor denies everything.
        interceptors.append(InterruptOn(gates, prefix, sensitive_escalates=alone))
        names.append("interrupt_on")
    if governance is None:
        return Governance(interceptors=tuple(interceptors), names=tuple(names))
    return dataclasses.replace(governance, interceptors=tuple(interceptors), names=tuple(names))
