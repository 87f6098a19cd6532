"""One step of an OpenAI-SDK run: ``Runner.run`` from the input or a decided ``RunState`` until
the agent finishes or pauses, and the state stored where it stands.

The state is serialized (``to_json``) and stored in PostgreSQL with its version, a keyed MAC of
the stored row under the app's secret (``sealing``), which the run's pending requests carry.
The user's context object is never part of it: a resume makes it again from the JSON the run's
row keeps (``run_config.UserRun``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_hooks import AgentHooksCoreError, InterceptionBlocked
from agents import (
    FunctionTool,
    InputGuardrailTripwireTriggered,
    OutputGuardrailTripwireTriggered,
    RunResult,
    RunResultStreaming,
)
from agents import Runner as SDKRunner

from approvals.errors import DatabaseUnavailable
from approvals.identity import call_identity
from approvals.model import RunStatus
from graphs.hooks.governance import Session, SessionHolder, record_row
from graphs.hosts.base import HostServices
from graphs.hosts.openai.calls import PATH_SEPARATOR, HostRun, enter, escaped_call_id, leave
from graphs.hosts.openai.governed import GovernedAgent, reachable
from graphs.hosts.openai.mcp import connected as mcp_connected
from graphs.hosts.openai.model_calls import ModelCallBlocked, governed_run_config
from graphs.hosts.openai.ports import OpenAIRunStates
from graphs.hosts.openai.run_config import UserRun, run_config_for
from graphs.hosts.openai.sealing import SealedRow, StateSeal
from graphs.hosts.openai.streaming import Published, run_streamed
from graphs.run.admission import blocked_reason
from graphs.run.outcome import RunOutcome
from graphs.run.step_events import Publish
from graphs.tool_call.storable import storable_text

log = logging.getLogger("approvals.openai")

#: The interrupt id an OpenAI-SDK pause records on its request: the SDK's call id.
INTERRUPT_PREFIX = "openai:"


@dataclass(frozen=True, kw_only=True, slots=True)
class SDKRun:
    """Which run a step serves, and where its state is kept."""

    run_id: str
    thread_id: str
    principal: str
    states: OpenAIRunStates
    seal: StateSeal
    #: The user's pieces of the run (context factory, ``RunConfig``, hooks, session).
    user: UserRun = field(default_factory=UserRun)
    #: The user's context object for this step, made from the run's context JSON.
    context: Any = None
    #: Given each event of the step as it happens (``approvals runs start --stream``).
    observe: Publish | None = None
    #: The call ids of the tool calls the resumed state already holds (``calls_made``).
    made: frozenset[str] = frozenset()


async def run_step(
    host: GovernedAgent,
    given: Any,
    run: SDKRun,
    holder: SessionHolder,
    services: HostServices,
    *,
    waiting: dict[str, tuple[str, str]],
    rejected: Sequence[tuple[Any, str]] = (),
    ran: dict[str, int] | None = None,
) -> RunOutcome:
    """Run the agent from ``given`` (the input, or a decided state) until it finishes or
    pauses, and store where it stands. ``waiting``: the calls the run waited on before
    (scoped call id -> request id and the call's identity). ``rejected``: the interruptions
    the state was told to reject, with their scoped call ids, whose ``pre_tool_call`` is
    emitted first (answered by the stored decision). ``ran``: how many times each tool ran
    in the run before (none at its start)."""
    session = holder.get(
        host.governance, graph=host.name, run_id=run.run_id, principal=run.principal
    )
    current = HostRun(
        run_id=run.run_id,
        thread_id=run.thread_id,
        principal=run.principal,
        agent_name=host.name,
        deps=services.deps,
        session=session,
        counts=dict(ran or {}),
    )
    published = Published(run.observe, run.made)
    result = await _run_agent(host, given, current, run, rejected, services.transient, published)
    if isinstance(result, RunOutcome):
        return dataclasses.replace(result, events=published.events)
    text = state_text(result)
    paused: list[tuple[str, str]] = []
    unrecorded: list[str] = []
    known = {**waiting, **current.requests}
    for item in result.interruptions:
        found = request_for(item, run.run_id, known, taken={c for c, _ in paused})
        if found is None:
            unrecorded.append(call_id(item) or "?")
        else:
            paused.append(found)
    outcome = RunOutcome(run_id=run.run_id, thread_id=run.thread_id, status=RunStatus.COMPLETED)
    if unrecorded:
        # The SDK paused on a call the engine recorded no request for (its arguments
        # could not be read, or a policy failed): nobody could ever decide it.
        outcome = dataclasses.replace(
            outcome,
            status=RunStatus.FAILED,
            error=(
                f"the agent paused on call(s) {', '.join(unrecorded)} with no approval "
                "request: nothing can decide them"
            )[:1000],
        )
    elif paused:
        outcome = dataclasses.replace(
            outcome,
            status=RunStatus.WAITING,
            waiting_on=tuple((r, INTERRUPT_PREFIX + c) for c, r in paused),
        )
    else:
        outcome = await _answered(outcome, result, session)
        await published.answer(result.last_agent, outcome.answer)
    await _store(run, host, text, paused, outcome)
    return dataclasses.replace(outcome, events=published.events)


async def _run_agent(
    host: GovernedAgent,
    given: Any,
    current: HostRun,
    run: SDKRun,
    rejected: Sequence[tuple[Any, str]],
    transient: Callable[[BaseException], bool],
    published: Published,
) -> RunResult | RunResultStreaming | RunOutcome:
    """The SDK's ``Runner.run`` with ``current`` as the run its tools see, and the user's
    context, ``RunConfig``, hooks and session; a failed run's outcome when the agent (or the
    SDK) failed, a blocked one when a guardrail of the user's tripped."""
    token = enter(current)
    try:
        for item, scoped in rejected:
            await record_rejection(current, host, item, scoped)
        user = run.user
        # The agents' MCP servers are connected for this step only: a pause closes them.
        options: dict[str, Any] = {
            # On a resume, the SDK puts it in place of the (empty) context the state holds.
            "context": run.context,
            "max_turns": host.max_turns,
            "hooks": user.hooks_for(),
            # A model named by a string comes from the run's provider: governed too.
            "run_config": governed_run_config(
                run_config_for(user, workflow=host.name, run_id=run.run_id, thread_id=run.thread_id)
            ),
            # The same session at the start and at each resume: the SDK writes the items the
            # pause held back to it, and refuses a session of another id.
            "session": user.session_for(current.deps, thread_id=run.thread_id, run_id=run.run_id),
        }
        async with mcp_connected(reachable(host.agent)):
            if published.observe is not None:
                # Followed as it runs: each tool call is published as the SDK makes it.
                return await run_streamed(host.agent, given, published, **options)
            result = await SDKRunner.run(host.agent, given, **options)
        await published.items(result.new_items)
        return result
    except ModelCallBlocked as stop:
        return blocked(stop.reason, current.run_id, current.thread_id)
    except (InputGuardrailTripwireTriggered, OutputGuardrailTripwireTriggered) as exc:
        which = "input" if isinstance(exc, InputGuardrailTripwireTriggered) else "output"
        name = exc.guardrail_result.guardrail.get_name()
        return RunOutcome(
            run_id=current.run_id,
            thread_id=current.thread_id,
            status=RunStatus.BLOCKED,
            error=storable_text(f"blocked by the {which} guardrail {name}"[:1000]),
        )
    except Exception as exc:  # a host failure stops the run, visibly
        if isinstance(exc, DatabaseUnavailable) or transient(exc):
            raise DatabaseUnavailable(f"{type(exc).__name__}: {exc}") from exc
        run_id = current.run_id
        log.exception("run %s failed", run_id, extra={"run_id": run_id})
        return RunOutcome(
            run_id=run_id,
            thread_id=current.thread_id,
            status=RunStatus.FAILED,
            error=storable_text(f"{type(exc).__name__}: {exc}"[:1000]),
        )
    finally:
        leave(token)


async def _answered(
    outcome: RunOutcome, result: RunResult | RunResultStreaming, session: Session
) -> RunOutcome:
    """A finished run's outcome: its final answer as ``output`` released it, or blocked."""
    final = result.final_output
    answer = final if isinstance(final, str) else None
    if final is not None and answer is None:
        answer = json.dumps(_plain(final), sort_keys=True, default=str)
    if answer is not None:
        # A model may repeat what a tool read: kept as the run's answer, escaped.
        answer = storable_text(answer)
    released, stopped = await emit_output(session, answer)
    if stopped is not None:
        return blocked(stopped, outcome.run_id, outcome.thread_id)
    return dataclasses.replace(outcome, answer=released)


async def _store(
    run: SDKRun,
    host: GovernedAgent,
    state: str,
    paused: list[tuple[str, str]],
    outcome: RunOutcome,
) -> None:
    """Store where the run stands, sealed (``StateSeal.version`` of the row)."""
    row = SealedRow(
        run_id=run.run_id,
        agent=host.name,
        state=state,
        waiting=tuple(paused),
        status=outcome.status.value,
        answer=outcome.answer,
        error=outcome.error,
    )
    await run.states.save(
        run_id=row.run_id,
        agent=row.agent,
        state=row.state,
        version=run.seal.version(row),
        waiting=row.waiting,
        status=row.status,
        answer=row.answer,
        error=row.error,
    )


def state_text(result: RunResult | RunResultStreaming) -> str:
    """The text of the run's ``RunState`` as stored: its JSON without the user's context
    (``_without_context``), which a resume makes again from the run's context JSON."""
    # Nothing of a custom context object goes into the state (the SDK would otherwise dump a
    # dataclass or a model, and warn); its mappings are taken out below.
    data = result.to_state().to_json(context_serializer=lambda _: {})
    return json.dumps(_without_context(data), sort_keys=True, separators=(",", ":"))


#: The keys of the SDK's serialized run context (``RunState.to_json``: the run's, and each
#: paused nested ``as_tool`` run's).
_CONTEXT_ENTRY = frozenset({"usage", "approvals", "context", "context_meta"})


def _without_context(value: Any) -> Any:
    """``value`` (a ``RunState``'s JSON) with every run context entry's user context left
    out: the entry says there was none, so no restore asks for it (the resume gives its own)."""
    if isinstance(value, list):
        return [_without_context(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: _without_context(v) for k, v in value.items() if k != "context"}
    if "context" in value:
        if value.keys() >= _CONTEXT_ENTRY:
            out["context"] = None
            out.pop("context_meta", None)
        else:
            out["context"] = _without_context(value["context"])
    return out


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


def call_id(item: Any) -> str | None:
    """The SDK's call id of an interruption (``None`` when it has none)."""
    raw = item.raw_item
    found = raw.get("call_id") if isinstance(raw, dict) else getattr(raw, "call_id", None)
    return found if isinstance(found, str) else None


def _arguments(item: Any) -> dict[str, Any] | None:
    try:
        args = json.loads(getattr(item, "arguments", None) or "{}")
    except ValueError:
        return None
    return args if isinstance(args, dict) else None


def request_for(
    item: Any, run_id: str, known: dict[str, tuple[str, str]], taken: Collection[str] = ()
) -> tuple[str, str] | None:
    """The scoped call id and request of an interruption, among ``known`` (scoped call id ->
    request id and identity), ``None`` when none is its.

    The SDK's item names its own call id, not the ``as_tool`` calls it runs inside: a
    request is the item's when its scoped id ends in that call id and its identity is the
    identity of the item's tool and arguments under the scoped id. Two nested runs whose
    calls have the same id, tool and arguments match both requests: each item takes one not
    ``taken`` yet (the SDK itself cannot apply decisions to them: see the host's resume)."""
    own = call_id(item)
    args = _arguments(item)
    name = getattr(item, "tool_name", None) or getattr(item, "name", None)
    if own is None or args is None or not isinstance(name, str):
        return None
    for scoped, (request_id, identity) in known.items():
        if scoped in taken:
            continue
        own_escaped = escaped_call_id(own)
        if scoped != own_escaped and not scoped.endswith(PATH_SEPARATOR + own_escaped):
            continue
        try:
            matches = call_identity(run_id=run_id, call_id=scoped, tool=name, args=args)
        except AgentHooksCoreError:
            return None
        if matches == identity:
            return scoped, request_id
    return None


async def record_rejection(current: HostRun, host: GovernedAgent, item: Any, scoped: str) -> None:
    """The interception record of a rejected call (see ``HostRun.record_rejection``), under
    its scoped call id."""
    name = getattr(item, "tool_name", None) or getattr(item, "name", None)
    owner = getattr(item, "agent", None)
    candidates = [owner, *reachable(host.agent)] if owner is not None else reachable(host.agent)
    tool = next(
        (
            t
            for agent in candidates
            for t in getattr(agent, "tools", ())
            if isinstance(t, FunctionTool) and t.name == name
        ),
        None,
    )
    args = _arguments(item)
    if tool is None or args is None:
        # The call never had a request of its own then (see ``run_step``'s unrecorded calls).
        return
    await current.record_rejection(tool, scoped, args)


async def ended(holder: SessionHolder, outcome: RunOutcome) -> RunOutcome:
    """The outcome with the session's records; ``agent_shutdown`` when the run ended."""
    session = holder.session
    if session is None:
        return outcome
    if outcome.status is not RunStatus.WAITING:
        await session.shutdown("completed" if outcome.status is RunStatus.COMPLETED else "error")
    return dataclasses.replace(outcome, records=tuple(record_row(r) for r in session.records()))


async def emit_output(session: Any, answer: str | None) -> tuple[str | None, dict[str, Any] | None]:
    """``output`` for the final answer: the answer as released, or why the run is blocked."""
    if answer is None:
        return None, None
    ctx = session.context("output", content=answer)
    try:
        await session.emit(ctx)
    except InterceptionBlocked as stopped:
        return None, blocked_reason(stopped)
    released = ctx["output"]["content"]
    return released if isinstance(released, str) else json.dumps(released), None


def blocked(stopped: dict[str, Any], run_id: str, thread_id: str) -> RunOutcome:
    """A run a policy stopped: blocked, saying where and why."""
    detail = stopped.get("message") or stopped.get("reason") or "denied"
    return RunOutcome(
        run_id=run_id,
        thread_id=thread_id,
        status=RunStatus.BLOCKED,
        error=f"blocked at {stopped.get('point')}: {detail}"[:1000],
    )
