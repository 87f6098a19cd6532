"""Starting and resuming OpenAI-SDK runs, under the same thread lock, queue and re-check as
LangGraph runs (``graphs.orchestration.runner.Runner`` hands them here).

After every ``Runner.run`` the SDK's ``RunState`` is serialized (``to_json``) and stored in
PostgreSQL with its version (a keyed MAC of the stored row under the app's secret, see
``sealing``), which the run's pending requests carry. A resume (a claimed job, holding the
thread's lock) loads the state, refuses it if its version is not this key's MAC of the row or
not the version its decided request was bound to (audited as ``run.state_tampered``), re-reads
every waiting call's decision from the database, applies it with ``state.approve(item)`` or
``state.reject(item, rejection_message=...)`` and runs the agent again, which may pause again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

from agent_hooks import InterceptionBlocked
from agents import FunctionTool, RunConfig, RunState
from agents import Runner as SDKRunner

from approvals.errors import DatabaseUnavailable, GraphLoadError, InvalidRunInput, ThreadBusy
from approvals.json_values import check_inputs
from approvals.model import JobStatus, ResumeCheck, RunStatus
from approvals.ports import ClaimedJob, NewRun, Runs
from graphs.hooks.governance import SessionHolder, record_row
from graphs.hosts.openai.calls import HostRun, enter, leave
from graphs.hosts.openai.host import OpenAIHost, reachable
from graphs.hosts.openai.ports import OPENAI_STATE_SEAL, OPENAI_STATES, OpenAIRunStates
from graphs.hosts.openai.sealing import SealCheck, SealedRow, StateSeal
from graphs.run.admission import blocked_reason, emit_input, emit_startup
from graphs.run.outcome import RunOutcome, complete_job
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.edits import successful_counts
from graphs.tool_call.storable import storable_text

log = logging.getLogger("approvals.openai")

MAX_MESSAGE_LENGTH = 20_000
MAX_INPUT_ITEMS = 200
#: The interrupt id an OpenAI-SDK pause records on its request: the SDK's call id.
INTERRUPT_PREFIX = "openai:"


def parse_openai_input(value: Any) -> str | list[dict[str, Any]]:
    """An OpenAI-SDK run's input: ``{"message": "..."}``, or ``{"input": [...]}`` with the
    SDK's input items (Responses API items, e.g. ``{"role": "user", "content": "..."}``)."""
    if not isinstance(value, dict):
        raise InvalidRunInput('input must be a JSON object like {"message": "..."}')
    unknown = set(value) - {"message", "input"}
    if unknown:
        raise InvalidRunInput(
            f"unknown input field(s): {', '.join(sorted(unknown))} (this agent takes message "
            "or input)"
        )
    if "message" in value and "input" in value:
        raise InvalidRunInput('give "message" or "input", not both')
    if "input" in value:
        items = value["input"]
        if (
            not isinstance(items, list)
            or not items
            or len(items) > MAX_INPUT_ITEMS
            or not all(isinstance(i, dict) for i in items)
        ):
            raise InvalidRunInput(
                f'"input" must be a list of 1 to {MAX_INPUT_ITEMS} input items (objects)'
            )
        if len(json.dumps(items)) > MAX_MESSAGE_LENGTH * 5:
            raise InvalidRunInput('"input" is too long')
        return items
    message = value.get("message")
    if not isinstance(message, str) or not message.strip():
        raise InvalidRunInput('"message" must be a non-empty string')
    if len(message) > MAX_MESSAGE_LENGTH:
        raise InvalidRunInput(f'"message" is longer than {MAX_MESSAGE_LENGTH} characters')
    return message


class OpenAIRunner:
    """Runs OpenAI-SDK agents for ``graphs.orchestration.runner.Runner``."""

    def __init__(
        self,
        *,
        deps: GraphDeps,
        runs: Runs,
        transient: Callable[[BaseException], bool] = lambda exc: False,
    ) -> None:
        self._deps = deps
        self._runs = runs
        self._transient = transient

    def _states(self, host: OpenAIHost) -> tuple[OpenAIRunStates, StateSeal]:
        try:
            return self._deps.provided(OPENAI_STATES), self._deps.provided(OPENAI_STATE_SEAL)
        except LookupError as exc:
            # Not "never": a worker of a host that gives the store may take the job.
            raise GraphLoadError(
                host.name,
                "OpenAI Agents SDK agent",
                "this host keeps no OpenAI run states: give GraphDeps.extras "
                "graphs.hosts.openai.openai_extras(storage.openai_runs.PgOpenAIRunStates(db), "
                "secret=the app's secret key)",
            ) from exc

    async def start(
        self,
        host: OpenAIHost,
        input: Any,
        *,
        principal: str,
        thread_id: str | None = None,
    ) -> RunOutcome:
        """Start a run of ``host``'s agent; returns when it finishes or pauses."""
        check_inputs(input=input, thread_id=thread_id, principal=principal)
        if thread_id is not None and not (0 < len(thread_id) <= 200):
            raise InvalidRunInput("thread id must be 1 to 200 characters")
        given = parse_openai_input(input)
        states, seal = self._states(host)  # before anything is written
        run_id = str(uuid.uuid4())
        given_thread = thread_id is not None
        thread_id = thread_id or run_id

        async def refuse_if_waiting() -> None:
            last = await self._runs.latest_on_thread(thread_id)
            if last is not None and last.status is RunStatus.WAITING:
                raise ThreadBusy(thread_id)

        # agent_startup and input, before anything is written: the run's row keeps the input
        # as admitted (nothing of a denied one, a masked one masked).
        holder = SessionHolder()
        session = holder.get(host.governance, graph=host.name, run_id=run_id, principal=principal)
        admitted, blocked = await _admit(session, host, given)
        kept: dict[str, Any] = {}
        if admitted is not None:
            kept = {"message": admitted} if isinstance(admitted, str) else {"input": admitted}
        new = NewRun(
            run_id=run_id, thread_id=thread_id, graph=host.name, started_by=principal, input=kept
        )
        async with self._runs.begin(new, check=refuse_if_waiting if given_thread else None) as run:
            try:
                if blocked is not None:
                    outcome = _blocked(blocked, run_id, thread_id)
                else:
                    outcome = await self._step(
                        host, admitted, run_id, thread_id, principal, holder, (states, seal), {}
                    )
            except DatabaseUnavailable as exc:
                # Nothing retries a start: it fails, visibly.
                outcome = RunOutcome(
                    run_id=run_id,
                    thread_id=thread_id,
                    status=RunStatus.FAILED,
                    error=str(exc)[:1000],
                )
            outcome = await _ended(holder, outcome)
            run.settle(outcome.settlement)
        return outcome

    async def resume(
        self, host: OpenAIHost, claimed: ClaimedJob, check: ResumeCheck
    ) -> RunOutcome | None:
        """Resume the run of a claimed job (the caller holds the thread's lock)."""
        job = claimed.job
        states, seal = self._states(host)
        stored = await states.load(job.run_id)
        if stored is None:
            await claimed.complete(JobStatus.FAILED, "the run has no stored state")
            return None
        waiting = {call_id: request_id for call_id, request_id in stored.waiting}
        decided = await states.decision(job.request_id)
        # The run this job is for and the agent resuming it, not the row's own say: a row
        # copied from another run or agent does not pass.
        sealed = seal.check(
            stored.version,
            SealedRow(
                run_id=job.run_id,
                agent=host.name,
                state=stored.state,
                waiting=stored.waiting,
                status=stored.status,
                answer=stored.answer,
                error=stored.error,
            ),
        )
        bound = decided.state_version if decided is not None else None
        pending_here = job.request_id in waiting.values()

        async def refuse(error: str, reason: str) -> RunOutcome:
            # Nothing of the state runs; the run fails, the job ends (it is never retried),
            # and the audit log says why. Never this key's MAC of the refused row: with it,
            # whoever reads the log could make that row pass.
            call_id = decided.call_id if decided is not None else job.call_id
            await states.record_refused(
                run_id=job.run_id,
                request_id=job.request_id,
                call_id=call_id,
                expected=bound or stored.version,
                found=stored.version,
                reason=reason,
                state_sha256=hashlib.sha256(stored.state.encode("utf-8")).hexdigest(),
            )
            log.error("run %s: %s", job.run_id, error, extra={"run_id": job.run_id})
            failed = RunOutcome(
                run_id=job.run_id,
                thread_id=job.thread_id,
                status=RunStatus.FAILED,
                error=error,
            )
            await claimed.complete(JobStatus.FAILED, error, failed.settlement)
            return failed

        if sealed is not SealCheck.INTACT:
            # The state is not one this host stored for this run (changed where it is kept,
            # or sealed under another key): none of it is read.
            return await refuse(f"{sealed.refusal}: the resume was refused", sealed.value)
        if pending_here and bound != stored.version:
            # A state this host stored, but not the one the request was decided on.
            altered = SealCheck.ALTERED
            return await refuse(f"{altered.refusal}: the resume was refused", altered.value)
        if not pending_here:
            # Already resumed (a sibling call's job, or a worker that died after storing the
            # state): settle the run from where the stored state stands, so it never stays
            # "waiting".
            settled = RunOutcome(
                run_id=job.run_id,
                thread_id=job.thread_id,
                status=RunStatus(stored.status),
                answer=stored.answer,
                error=stored.error,
                waiting_on=tuple((r, INTERRUPT_PREFIX + c) for c, r in stored.waiting),
            )
            await claimed.complete(JobStatus.SKIPPED, "already resumed", settled.settlement)
            return None
        try:
            state: RunState[Any, Any] = await RunState.from_json(
                host.agent, json.loads(stored.state)
            )
        except Exception as exc:
            # Its versions match, yet the SDK cannot read it as a state of this agent (another
            # agent's name, no state at all): whoever rewrote the state rewrote its versions
            # too, or another SDK release wrote it. Raised from here, it would fail the
            # worker's pass and leave the job queued to fail every pass after.
            return await refuse(
                "the stored run state cannot be read as a state of this agent"
                f" ({type(exc).__name__}: {storable_text(str(exc)[:200])}): the resume was"
                " refused",
                "unreadable",
            )
        applied = 0
        rejected: list[Any] = []
        for item in state.get_interruptions():
            found_id = _call_id(item)
            request_id = waiting.get(found_id) if found_id is not None else None
            if request_id is None:
                continue
            decision = await states.decision(request_id)
            if decision is None or decision.status == "pending":
                continue
            if decision.status in ("approved", "answered"):
                # Never ``always_approve``: every call is decided on its own.
                state.approve(item)
            else:
                state.reject(item, rejection_message=_rejection(decision))
                rejected.append(item)
            applied += 1
        if applied == 0:
            await claimed.complete(JobStatus.SKIPPED, "no decision to apply")
            return None
        run = await self._runs.get(job.run_id)
        holder = SessionHolder(first_sequence=check.next_sequence)
        outcome = await self._step(
            host,
            state,
            job.run_id,
            job.thread_id,
            run.started_by if run is not None else "",
            holder,
            (states, seal),
            waiting,
            rejected,
            # Each resume is a new invocation: the run's count goes on from its ledger.
            successful_counts(await self._deps.ledger.for_run(job.run_id)),
        )
        outcome = await _ended(holder, outcome)
        await complete_job(claimed, outcome)
        return outcome

    async def _step(
        self,
        host: OpenAIHost,
        given: Any,
        run_id: str,
        thread_id: str,
        principal: str,
        holder: SessionHolder,
        store: tuple[OpenAIRunStates, StateSeal],
        waiting: dict[str, str],
        rejected: list[Any] | None = None,
        ran: dict[str, int] | None = None,
    ) -> RunOutcome:
        """Run the agent from ``given`` (the input, or a decided state) until it finishes or
        pauses, and store where it stands. ``rejected``: the interruptions the state was told
        to reject, whose ``pre_tool_call`` is emitted first (answered by the stored decision).
        ``ran``: how many times each tool ran in the run before (none at its start)."""
        session = holder.get(host.governance, graph=host.name, run_id=run_id, principal=principal)
        current = HostRun(
            run_id=run_id,
            thread_id=thread_id,
            principal=principal,
            agent_name=host.name,
            deps=self._deps,
            session=session,
            counts=dict(ran or {}),
        )
        token = enter(current)
        try:
            for item in rejected or ():
                await _record_rejection(current, host, item)
            result = await SDKRunner.run(
                host.agent,
                given,
                max_turns=host.max_turns,
                run_config=RunConfig(tracing_disabled=True, workflow_name=host.name),
            )
        except Exception as exc:  # a host failure stops the run, visibly
            if isinstance(exc, DatabaseUnavailable) or self._transient(exc):
                raise DatabaseUnavailable(f"{type(exc).__name__}: {exc}") from exc
            log.exception("run %s failed", run_id, extra={"run_id": run_id})
            return RunOutcome(
                run_id=run_id,
                thread_id=thread_id,
                status=RunStatus.FAILED,
                error=storable_text(f"{type(exc).__name__}: {exc}"[:1000]),
            )
        finally:
            leave(token)
        text = json.dumps(result.to_state().to_json(), sort_keys=True, separators=(",", ":"))
        paused: list[tuple[str, str]] = []
        unrecorded: list[str] = []
        for item in result.interruptions:
            call_id = _call_id(item) or "?"
            request_id = current.requests.get(call_id) or waiting.get(call_id)
            if request_id is None:
                unrecorded.append(call_id)
            else:
                paused.append((call_id, request_id))
        outcome = RunOutcome(run_id=run_id, thread_id=thread_id, status=RunStatus.COMPLETED)
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
            final = result.final_output
            answer = final if isinstance(final, str) else None
            if final is not None and answer is None:
                answer = json.dumps(_plain(final), sort_keys=True, default=str)
            if answer is not None:
                # A model may repeat what a tool read: kept as the run's answer, escaped.
                answer = storable_text(answer)
            released, stopped = await _emit_output(session, answer)
            if stopped is not None:
                outcome = _blocked(stopped, run_id, thread_id)
            else:
                outcome = dataclasses.replace(outcome, answer=released)
        states, seal = store
        row = SealedRow(
            run_id=run_id,
            agent=host.name,
            state=text,
            waiting=tuple(paused),
            status=outcome.status.value,
            answer=outcome.answer,
            error=outcome.error,
        )
        await states.save(
            run_id=row.run_id,
            agent=row.agent,
            state=row.state,
            version=seal.version(row),
            waiting=row.waiting,
            status=row.status,
            answer=row.answer,
            error=row.error,
        )
        return outcome


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


def _call_id(item: Any) -> str | None:
    raw = item.raw_item
    found = raw.get("call_id") if isinstance(raw, dict) else getattr(raw, "call_id", None)
    return found if isinstance(found, str) else None


async def _record_rejection(current: HostRun, host: OpenAIHost, item: Any) -> None:
    """The interception record of a rejected call (see ``HostRun.record_rejection``)."""
    call_id = _call_id(item)
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
    try:
        args = json.loads(getattr(item, "arguments", None) or "{}")
    except ValueError:
        args = None
    if call_id is None or tool is None or not isinstance(args, dict):
        # The call never had a request of its own then (see ``_step``'s unrecorded calls).
        return
    await current.record_rejection(tool, call_id, args)


def _rejection(decision: Any) -> str:
    """What the model is told about a rejected (or expired) call: who rejected it and why."""
    if decision.status == "expired":
        return "The call was not run: its approval request expired."
    who = decision.decided_by or "an approver"
    reason = f": {decision.reason}" if decision.reason else ""
    return f"The call was rejected by {who}{reason}"


async def _ended(holder: SessionHolder, outcome: RunOutcome) -> RunOutcome:
    """The outcome with the session's records; ``agent_shutdown`` when the run ended."""
    session = holder.session
    if session is None:
        return outcome
    if outcome.status is not RunStatus.WAITING:
        await session.shutdown("completed" if outcome.status is RunStatus.COMPLETED else "error")
    return dataclasses.replace(outcome, records=tuple(record_row(r) for r in session.records()))


async def _admit(session: Any, host: OpenAIHost, given: Any) -> tuple[Any, dict[str, Any] | None]:
    """``agent_startup`` and ``input`` for a new run: the input as admitted (a transform's
    rewrite), or why the run is blocked. The SDK cannot pause for its input, so an escalation
    here blocks the run (a deny to the emitter without a slot)."""
    tools = [t.name for agent in _agents(host) for t in agent.tools]
    stopped = await emit_startup(session, tools)
    if stopped is not None:
        return None, stopped
    content, stopped = await emit_input(session, given, None)
    if stopped is not None:
        return None, stopped
    if isinstance(given, str) and not isinstance(content, str):
        return None, {"point": "input", "reason": "transform", "message": "not a message"}
    if isinstance(given, list) and not (
        isinstance(content, list) and all(isinstance(i, dict) for i in content)
    ):
        return None, {"point": "input", "reason": "transform", "message": "not input items"}
    return content, None


async def _emit_output(
    session: Any, answer: str | None
) -> tuple[str | None, dict[str, Any] | None]:
    """``output`` for the final answer: the answer as released, or why the run is blocked."""
    if answer is None:
        return None, None
    ctx = session.context("output", content=answer)
    try:
        await session.emit(ctx)
    except InterceptionBlocked as blocked:
        return None, blocked_reason(blocked)
    released = ctx["output"]["content"]
    return released if isinstance(released, str) else json.dumps(released), None


def _blocked(blocked: dict[str, Any], run_id: str, thread_id: str) -> RunOutcome:
    detail = blocked.get("message") or blocked.get("reason") or "denied"
    return RunOutcome(
        run_id=run_id,
        thread_id=thread_id,
        status=RunStatus.BLOCKED,
        error=f"blocked at {blocked.get('point')}: {detail}"[:1000],
    )


def _agents(host: OpenAIHost) -> list[Any]:
    return list(reachable(host.agent))
