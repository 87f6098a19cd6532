"""``ApprovalMiddleware``: the engine's durable approval for langchain's ``create_agent``.

A drop-in for langchain's ``HumanInTheLoopMiddleware``: the same ``interrupt_on`` mapping says
which tools wait for a human, and ``policy=`` / ``governance=`` add what ``build_agent`` takes.
Where ``HumanInTheLoopMiddleware`` pauses with the question and takes the answer from the
resume value, every tool call here goes through the engine's tool step (``graphs.tool_call.step``):
validated against what the model may set, ``pre_tool_call`` emitted, the pending request
written before the pause, the decision read from the database (never from the resume value)
and consumed once, the tool run at most once by the execution ledger, ``post_tool_call`` on
its result.

Which run a call belongs to, who started it and where the engine's ports are come from the
run's config (``configurable``), as the engine's runner sets it, never from the agent's state:
the agent keeps its own state schema.

The middleware's parts, one concept each: ``interrupt_on`` and the governance assembled from it
(``graphs.langchain.interrupt_on``), the state it adds and the runner's input admission in its terms
(``graphs.langchain.host_state``), the model and tool seams it inherits
(``graphs.langchain.model_seam``, ``graphs.langchain.tool_seam``) and what a tool answered, to the
ledger and to the model (``graphs.langchain.tool_answers``). Their public names are importable
from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.human_in_the_loop import (
    _EDIT_NOTICE,
    HumanInTheLoopMiddleware,
    _HumanInTheLoopState,
)
from langchain.agents.middleware.types import AgentState, PrivateStateAttr, hook_config
from langchain_core.messages import HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.runtime import Runtime
from pydantic import BaseModel

from approvals.policy import Policy
from graphs.hooks.governance import Governance, session_of
from graphs.langchain import interrupt_on as interrupt_on_
from graphs.langchain.host_state import (
    BLOCKED,
    NEW_INPUT,
    HostInputGate,
    messages_of,
)
from graphs.langchain.host_state import ApprovalState as _HostState
from graphs.langchain.in_process import (
    IN_PROCESS_GRAPH,
    DecisionsOnlyThroughEngine,
    LocalApprovals,
    batched_pause,
    engine_run,
    graph_config,
    in_process_run,
)
from graphs.langchain.interrupt_on import DECISIONS, Gate, InterruptOn
from graphs.langchain.model_seam import ASYNC_ONLY, ModelSeam
from graphs.langchain.tool_answers import (
    ToolReportedError,
)
from graphs.langchain.tool_seam import ToolSeam
from graphs.langchain.tools import governed_view
from graphs.run.admission import emit_input, point_slot
from graphs.run.config import EngineRun
from graphs.tool_call.tools import GovernedTool, ToolCall

__all__ = [
    "BLOCKED",
    "DECISIONS",
    "NEW_INPUT",
    "ApprovalMiddleware",
    "ApprovalState",
    "DecisionsOnlyThroughEngine",
    "Gate",
    "HostInputGate",
    "InterruptOn",
    "LocalApprovals",
    "ToolReportedError",
]


class ApprovalState(_HostState, _HumanInTheLoopState[Any]):
    """The middleware's state: the runner's admission keys, HumanInTheLoopMiddleware's edits,
    and the decisions an in-process resume gave for the turn's calls."""

    #: ``{"turn": <AIMessage id>, "calls": {call id: HITL decision}}``: what the application's
    #: resume decided in ``after_model`` (batched), which the tool seam records before it runs.
    approvals_hitl_decided: NotRequired[Annotated[dict[str, Any], PrivateStateAttr]]


class ApprovalMiddleware(ModelSeam, ToolSeam):
    """Durable human approval for ``create_agent``: ``middleware=[ApprovalMiddleware(
    interrupt_on={"issue_refund": True})]`` where ``HumanInTheLoopMiddleware`` stood.

    It is a ``HumanInTheLoopMiddleware``: the same ``interrupt_on`` (``True``, ``False`` or
    ``InterruptOnConfig`` with ``allowed_decisions``, ``description`` text or factory and
    ``when``), ``description_prefix``, ``edit_notice`` and ``interrupt_mode``, the same interrupt
    payloads and the same messages. ``policy`` (a policy file or a loaded ``Policy``) and
    ``governance`` add what ``build_agent`` takes; every call of every tool goes through them.

    Run by the engine (``approvals runs start``, ``Runner.start``), a decision comes only from
    an authenticated approver, through the engine. Invoked by the application itself, a
    resume value (``Command(resume=...)``) is taken as the application's decision
    (``resume_decisions="accept"``, HITL's behaviour and the default), recorded in ``local``
    and consumed once; ``resume_decisions="refuse"`` takes decisions only from approvers
    (``local`` then names the engine's database, where they decide).
    """

    def __init__(
        self,
        interrupt_on: Mapping[str, bool | Mapping[str, Any]] | None = None,
        *,
        policy: str | Path | Policy | None = None,
        governance: Governance | None = None,
        description_prefix: str = "Tool execution requires approval",
        edit_notice: str | None = _EDIT_NOTICE,
        interrupt_mode: str = "batched",
        local: LocalApprovals | None = None,
        resume_decisions: str = "accept",
        name: str = IN_PROCESS_GRAPH,
    ) -> None:
        # Ours first: what this engine cannot honour is refused with its reason; then HITL's
        # own reading (and its errors) of the same mapping.
        interrupt_on_.gates(interrupt_on or {})
        HumanInTheLoopMiddleware.__init__(
            self,
            dict(interrupt_on or {}),  # type: ignore[arg-type]
            description_prefix=description_prefix,
            edit_notice=edit_notice,
            interrupt_mode=interrupt_mode,  # type: ignore[arg-type]
        )
        if resume_decisions not in ("accept", "refuse"):
            raise ValueError('resume_decisions must be "accept" or "refuse"')
        self._gates = interrupt_on_.gates(self.interrupt_on)
        self.governance = interrupt_on_.governance(
            self._gates, description_prefix, policy, governance
        )
        #: Only ``interrupt_on`` governs (no policy, no given governance): an ungated call of
        #: an in-process agent runs exactly as ``ToolNode`` runs it.
        self._gates_only = policy is None and governance is None
        self.local = local if local is not None else LocalApprovals.in_memory()
        self.resume_decisions = resume_decisions
        self.graph_name = name
        self._models: dict[int, tuple[BaseTool, type[BaseModel]]] = {}

    state_schema = ApprovalState

    #: Whether this middleware's ``before_agent`` runs (in a ``create_agent`` agent): a
    #: ``GovernedToolNode``'s does not, so an input waiting for a human stops its run.
    pauses_for_input = True

    def _run_of(self, config: RunnableConfig) -> EngineRun | None:
        """The run a model hook belongs to: the engine's, or, for an in-process agent with a
        policy or governance, the thread's own (``None``: nothing to govern there)."""
        run = engine_run(config)
        if run is not None or self._gates_only:
            return run
        return in_process_run(config, self.local, self.graph_name, "model")

    def catalog_tools(self, tools: Iterable[BaseTool]) -> list[GovernedTool]:
        """``tools`` as listings and edit checks see them (never run from there)."""

        async def not_here(args: dict[str, Any], call: ToolCall) -> Any:
            raise RuntimeError("a listed tool runs only through its agent")

        return [
            self._governed_as_is(t)
            or governed_view(
                t, not_here, sensitive=t.name in self._gates, args_model=self._args_model(t)
            )
            for t in tools
        ]

    # -- the agent's input ---------------------------------------------------------------

    @hook_config(can_jump_to=["end"])
    async def abefore_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """``input`` for a user message that waits for a human: the runner's admission
        governed every other one (``agent_startup`` and ``input``) before the agent saw it.
        Here the run pauses until the message is decided; a rejected one leaves the
        conversation and ends the run."""
        if not state.get(NEW_INPUT):
            return None
        config = get_config()
        run = EngineRun.of(config)
        session = session_of(
            config, self.governance, graph=run.graph, run_id=run.run_id, principal=run.principal
        )
        messages = messages_of(state)
        done: dict[str, Any] = {NEW_INPUT: False}
        human = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
        if human is None:
            return done
        turn = sum(1 for m in messages if isinstance(m, HumanMessage))
        here = point_slot(run, "input", turn, {"content": human.content})
        content, blocked = await emit_input(session, human.content, here)
        if blocked is not None:
            session.blocked = blocked
            remove = [RemoveMessage(id=human.id)] if human.id else []
            return {**done, BLOCKED: blocked, "messages": remove, "jump_to": "end"}
        if content != human.content:
            return {**done, "messages": [HumanMessage(content=content, id=human.id)]}
        return done

    def before_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        # Only the engine's admission sets NEW_INPUT, and the engine runs agents asynchronously.
        if not state.get(NEW_INPUT):
            return None
        raise NotImplementedError(ASYNC_ONLY)

    # -- HumanInTheLoopMiddleware's pause after the model (batched) -----------------------

    @hook_config(can_jump_to=["end"])
    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """HITL's batched interrupt, for an agent the application invokes itself. Under the
        engine (or with ``resume_decisions="refuse"``) every call pauses in the tool seam
        instead, where the decision is read from the database."""
        config = graph_config()
        if config is None:
            return HumanInTheLoopMiddleware.after_model(self, state, runtime)
        if state.get(BLOCKED):
            # The model seam stopped the agent (a deny): this hook follows the model node, so
            # the run ends here, as the seam's jump said.
            return {"jump_to": "end"}
        if engine_run(config) is not None or self.resume_decisions == "refuse":
            return None
        if self.interrupt_mode == "per_call":
            return None  # each call pauses in the tool seam, as HITL's per-call mode does
        return batched_pause(self, state, runtime)

    @hook_config(can_jump_to=["end"])
    async def aafter_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return self.after_model(state, runtime)
