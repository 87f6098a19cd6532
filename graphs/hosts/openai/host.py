"""An OpenAI Agents SDK agent as an ``AgentHost``: its runs start, pause and resume under the same
thread lock, queue and re-check as LangGraph runs.

After every ``Runner.run`` the SDK's ``RunState`` is stored, sealed (``step``). A resume (a
claimed job, holding the thread's lock) loads the state, refuses it if its version is not this
key's MAC of the row or not the version its decided request was bound to (audited as
``run.state_tampered``), re-reads every waiting call's decision from the database, applies it
with ``state.approve(item)`` or ``state.reject(item, rejection_message=...)`` and runs the agent
again, which may pause again.

Each step runs with the user's pieces of the run (``run_config.UserRun``): the context object
its factory makes from the run's context JSON (kept on the run's row, made again at each
resume), the user's ``RunConfig`` and hooks, and the thread's session.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from agents import Agent, RunState

from approvals.errors import DatabaseUnavailable, GraphLoadError, InvalidRunInput
from approvals.model import JobStatus, ResumeCheck, ResumeJob, Run, RunStatus
from graphs.hooks.governance import Governance, SessionHolder
from graphs.hosts.base import FirstStep, HostServices, JobEnd, RunStart
from graphs.hosts.openai.governed import GovernedAgent, OpenAIAgent, reachable
from graphs.hosts.openai.input import admit, parse_context, parse_openai_input
from graphs.hosts.openai.mcp import connected as mcp_connected
from graphs.hosts.openai.ports import (
    OPENAI_SESSIONS,
    OPENAI_STATE_SEAL,
    OPENAI_STATES,
    OpenAIRunStates,
    StoredDecision,
    StoredState,
)
from graphs.hosts.openai.run_config import POSTGRES_SESSION, UserRun
from graphs.hosts.openai.sealing import SealCheck, SealedRow, StateSeal
from graphs.hosts.openai.step import (
    INTERRUPT_PREFIX,
    SDKRun,
    blocked,
    ended,
    request_for,
    run_step,
)
from graphs.hosts.openai.streaming import calls_made
from graphs.run.outcome import RunOutcome
from graphs.tool_call.edits import successful_counts
from graphs.tool_call.storable import storable_text
from graphs.tool_call.tools import GovernedTool

log = logging.getLogger("approvals.openai")


class OpenAIHost(GovernedAgent):
    """A registered OpenAI-SDK agent (``GovernedAgent``) and how its runs are run."""

    kind = "an OpenAI Agents SDK agent"

    def __init__(self, name: str, found: Agent[Any] | OpenAIAgent) -> None:
        super().__init__(name, found)
        given = found if isinstance(found, OpenAIAgent) else OpenAIAgent(found)
        #: The user's pieces of the agent's runs (``UserRunInvalid`` when unusable).
        self.user_run = UserRun.of(name, given)

    async def start(self, run: RunStart, services: HostServices) -> FirstStep:
        given = parse_openai_input(run.input)
        data = parse_context(run.input, takes_context=self.user_run.context is not None)
        states, seal = self._states(services)  # before anything is written
        self._check_sessions(services)
        try:
            context = await self.user_run.context_for(data)
        except Exception as exc:  # the user's factory refuses what it was given
            raise InvalidRunInput(
                "the agent's context factory refused the context: "
                + storable_text(f"{type(exc).__name__}: {exc}"[:300])
            ) from exc
        # agent_startup and input, before anything is written: the run's row keeps the input
        # as admitted (nothing of a denied one, a masked one masked).
        holder = SessionHolder()
        session = holder.get(
            self.governance, graph=self.name, run_id=run.run_id, principal=run.principal
        )
        admitted, stopped = await admit(session, self, given)
        kept: dict[str, Any] = {}
        if admitted is not None:
            kept = {"message": admitted} if isinstance(admitted, str) else {"input": admitted}
            if data is not None:
                # What each resume makes the context from again.
                kept["context"] = data
        sdk_run = SDKRun(
            run_id=run.run_id,
            thread_id=run.thread_id,
            principal=run.principal,
            states=states,
            seal=seal,
            user=self.user_run,
            context=context,
            observe=run.observe,
        )

        async def first() -> RunOutcome:
            try:
                if stopped is not None:
                    outcome = blocked(stopped, run.run_id, run.thread_id)
                else:
                    outcome = await run_step(self, admitted, sdk_run, holder, services, waiting={})
            except DatabaseUnavailable as exc:
                # Nothing retries a start: it fails, visibly.
                outcome = RunOutcome(
                    run_id=run.run_id,
                    thread_id=run.thread_id,
                    status=RunStatus.FAILED,
                    error=str(exc)[:1000],
                )
            return await ended(holder, outcome)

        return FirstStep(input=kept, run=first)

    async def resume(
        self, job: ResumeJob, check: ResumeCheck, services: HostServices
    ) -> RunOutcome | JobEnd:
        store = self._states(services)
        states, seal = store
        stored = await states.load(job.run_id)
        if stored is None:
            return JobEnd(status=JobStatus.FAILED, error="the run has no stored state")
        decisions = {r: await states.decision(r) for _, r in stored.waiting}
        decided = decisions.get(job.request_id) or await states.decision(job.request_id)
        pending_here = job.request_id in decisions
        refusal = self._refusal(job, stored, decided, seal, pending_here)
        if refusal is not None:
            return await _refuse(states, job, stored, decided, *refusal)
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
            return JobEnd(
                status=JobStatus.SKIPPED, error="already resumed", settlement=settled.settlement
            )
        # The agents' MCP servers are connected from the reading of the state (the SDK lists
        # their tools to restore it) to the end of the step.
        async with mcp_connected(reachable(self.agent)):
            return await self._restore_and_step(job, check, stored, decisions, store, services)

    async def _restore_and_step(
        self,
        job: ResumeJob,
        check: ResumeCheck,
        stored: StoredState,
        decisions: dict[str, StoredDecision | None],
        store: tuple[OpenAIRunStates, StateSeal],
        services: HostServices,
    ) -> RunOutcome | JobEnd:
        """The stored state read back with the run's context, its decisions applied, and the
        agent run on from it; a failed run when any of it cannot be done."""
        states, seal = store
        decided = decisions.get(job.request_id)
        row = await services.runs.get(job.run_id)
        try:
            context = await self.user_run.context_for(_context_json(row))
        except Exception as exc:  # the factory refuses the JSON it took when the run started
            return _failed(
                job, "the agent's context could not be made again from the run's context", exc
            )
        data = json.loads(stored.state)
        try:
            state: RunState[Any, Any] = await RunState.from_json(
                self.agent, data, context_override=context
            )
        except Exception as exc:
            # Its versions match, yet the SDK cannot read it as a state of this agent (another
            # agent's name, no state at all): whoever rewrote the state rewrote its versions
            # too, or another SDK release wrote it. Raised from here, it would fail the
            # worker's pass and leave the job queued to fail every pass after.
            error = (
                "the stored run state cannot be read as a state of this agent"
                f" ({type(exc).__name__}: {storable_text(str(exc)[:200])}): the resume was"
                " refused"
            )
            return await _refuse(states, job, stored, decided, error, "unreadable")
        waiting = {
            c: (r, found.identity)
            for c, r in stored.waiting
            if (found := decisions.get(r)) is not None
        }
        try:
            rejected = _apply_decisions(state, job.run_id, waiting, decisions)
        except Exception as exc:
            # The SDK refused a decision (two nested runs whose calls it cannot tell apart,
            # say): the run fails where an operator sees it, never stays "waiting" with
            # nothing left to decide. Nothing of the state ran.
            return _failed(job, "the decisions could not be applied to the agent's state", exc)
        if rejected is None:
            return JobEnd(status=JobStatus.SKIPPED, error="no decision to apply")
        sdk_run = SDKRun(
            run_id=job.run_id,
            thread_id=job.thread_id,
            principal=row.started_by if row is not None else "",
            states=states,
            seal=seal,
            user=self.user_run,
            context=context,
            made=calls_made(data),
        )
        return await self._step_decided(job, check, state, waiting, rejected, sdk_run, services)

    async def waiting(self, thread_id: str) -> bool:
        """``False``: an SDK run's state is its own (stored by run), not the thread's."""
        return False

    async def close_waiting(self, thread_id: str, notice: str) -> bool:
        """``True``: nothing but a cancelled run's own state waits, and it is never resumed."""
        return True

    def tools(self) -> list[GovernedTool]:
        """None: the SDK's tools take no edits (``describe_tools`` lists them)."""
        return []

    def edit_governance(self) -> Governance | None:
        """``None``: its requests take no edits, so there is nothing to check one against."""
        return None

    def _states(self, services: HostServices) -> tuple[OpenAIRunStates, StateSeal]:
        deps = services.deps
        try:
            return deps.provided(OPENAI_STATES), deps.provided(OPENAI_STATE_SEAL)
        except LookupError as exc:
            # Not "never": a worker of a host that gives the store may take the job.
            raise GraphLoadError(
                self.name,
                "OpenAI Agents SDK agent",
                "this host keeps no OpenAI run states: give GraphDeps.extras "
                "graphs.hosts.openai.openai_extras(storage.openai_runs.PgOpenAIRunStates(db), "
                "secret=the app's secret key)",
            ) from exc

    def _check_sessions(self, services: HostServices) -> None:
        """``GraphLoadError`` when the agent's session is the engine's and this host keeps
        none (before anything is written)."""
        if self.user_run.session != POSTGRES_SESSION:
            return
        try:
            services.deps.provided(OPENAI_SESSIONS)
        except LookupError as exc:
            raise GraphLoadError(
                self.name,
                "OpenAI Agents SDK agent",
                'this host keeps no OpenAI sessions (session="postgres"): give '
                "GraphDeps.extras openai_extras(..., "
                "sessions=storage.openai_sessions.PgOpenAISessions(db))",
            ) from exc

    def _refusal(
        self,
        job: ResumeJob,
        stored: StoredState,
        decided: StoredDecision | None,
        seal: StateSeal,
        pending_here: bool,
    ) -> tuple[str, str] | None:
        """Why the stored state must not be resumed (the run's error, the audited reason),
        if it must not."""
        # The run this job is for and the agent resuming it, not the row's own say: a row
        # copied from another run or agent does not pass.
        sealed = seal.check(
            stored.version,
            SealedRow(
                run_id=job.run_id,
                agent=self.name,
                state=stored.state,
                waiting=stored.waiting,
                status=stored.status,
                answer=stored.answer,
                error=stored.error,
            ),
        )
        if sealed is not SealCheck.INTACT:
            # The state is not one this host stored for this run (changed where it is kept,
            # or sealed under another key): none of it is read.
            return f"{sealed.refusal}: the resume was refused", sealed.value
        bound = decided.state_version if decided is not None else None
        if pending_here and bound != stored.version:
            # A state this host stored, but not the one the request was decided on.
            altered = SealCheck.ALTERED
            return f"{altered.refusal}: the resume was refused", altered.value
        return None

    async def _step_decided(
        self,
        job: ResumeJob,
        check: ResumeCheck,
        state: RunState[Any, Any],
        waiting: dict[str, tuple[str, str]],
        rejected: list[tuple[Any, str]],
        sdk_run: SDKRun,
        services: HostServices,
    ) -> RunOutcome:
        """Run the agent on from ``state``, its decisions applied (``rejected``: the
        interruptions it was told to reject)."""
        holder = SessionHolder(first_sequence=check.next_sequence)
        outcome = await run_step(
            self,
            state,
            sdk_run,
            holder,
            services,
            waiting=waiting,
            rejected=rejected,
            # Each resume is a new invocation: the run's count goes on from its ledger.
            ran=successful_counts(await services.deps.ledger.for_run(job.run_id)),
        )
        return await ended(holder, outcome)


async def _refuse(
    states: OpenAIRunStates,
    job: ResumeJob,
    stored: StoredState,
    decided: StoredDecision | None,
    error: str,
    reason: str,
) -> RunOutcome:
    """Nothing of the state runs; the run fails, the job ends (it is never retried), and the
    audit log says why. Never this key's MAC of the refused row: with it, whoever reads the
    log could make that row pass."""
    bound = decided.state_version if decided is not None else None
    await states.record_refused(
        run_id=job.run_id,
        request_id=job.request_id,
        call_id=decided.call_id if decided is not None else job.call_id,
        expected=bound or stored.version,
        found=stored.version,
        reason=reason,
        state_sha256=hashlib.sha256(stored.state.encode("utf-8")).hexdigest(),
    )
    log.error("run %s: %s", job.run_id, error, extra={"run_id": job.run_id})
    return RunOutcome(
        run_id=job.run_id, thread_id=job.thread_id, status=RunStatus.FAILED, error=error
    )


def _apply_decisions(
    state: RunState[Any, Any],
    run_id: str,
    waiting: dict[str, tuple[str, str]],
    decisions: dict[str, StoredDecision | None],
) -> list[tuple[Any, str]] | None:
    """Apply each waiting call's stored decision (``decisions``, by request id) to ``state``:
    the interruptions it rejected, each with its scoped call id, or ``None`` when no call was
    decided. ``waiting``: scoped call id -> request id and the call's identity."""
    applied = 0
    rejected: list[tuple[Any, str]] = []
    taken: set[str] = set()
    for item in state.get_interruptions():
        found = request_for(item, run_id, waiting, taken)
        if found is None:
            continue
        scoped, request_id = found
        taken.add(scoped)
        decision = decisions.get(request_id)
        if decision is None or decision.status == "pending":
            continue
        if decision.status in ("approved", "answered"):
            # Never ``always_approve``: a decision made "always" is applied to this call
            # alone; the engine's standing grant (approvals.grants), which an operator can
            # revoke, decides the later calls in the gate (graphs.hooks.approval).
            state.approve(item)
        else:
            state.reject(item, rejection_message=_rejection(decision))
            rejected.append((item, scoped))
        applied += 1
    return rejected if applied else None


def _context_json(run: Run | None) -> dict[str, Any] | None:
    """The context JSON the run's row keeps (``None``: it was given none)."""
    data = run.input.get("context") if run is not None else None
    return data if isinstance(data, dict) else None


def _failed(job: ResumeJob, what: str, exc: Exception) -> RunOutcome:
    """A failed run, nothing of its state run: ``what`` went wrong, and why (``exc``)."""
    error = storable_text(f"{what} ({type(exc).__name__}: {exc})"[:1000])
    log.error("run %s: %s", job.run_id, error, extra={"run_id": job.run_id})
    return RunOutcome(
        run_id=job.run_id, thread_id=job.thread_id, status=RunStatus.FAILED, error=error
    )


def _rejection(decision: Any) -> str:
    """What the model is told about a rejected (or expired) call: who rejected it and why."""
    if decision.status == "expired":
        return "The call was not run: its approval request expired."
    who = decision.decided_by or "an approver"
    reason = f": {decision.reason}" if decision.reason else ""
    return f"The call was rejected by {who}{reason}"
