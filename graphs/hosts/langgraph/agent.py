"""The governed agent loop: every point of a run passes the AGENT-HOOKS-0.1 emitter.

The runner emits ``agent_startup`` and ``input`` for a new message before the graph runs, so
that the graph's checkpoints only ever hold what ``input`` admitted (``graphs.run.admission``);
``start`` emits them for a message nobody governed yet (a graph invoked directly) and for an
input that waits for a human (only a graph can pause): the graph enters at ``agent``, which
hands such a message to ``start`` first. ``agent`` emits
``pre_model_call`` (a transform changes the messages the model receives), calls the model, emits
``post_model_call`` (a transform changes the response the run goes on with; a denied response is
never written to the state) and, for a final answer, ``output`` (the answer enters the state, and
reaches the caller, only once ``output`` allowed it). Each tool call of a model turn runs as its
own task (LangGraph ``Send``) through ``pre_tool_call`` and ``post_tool_call``, so each can
pause for its own decision and be resumed independently. ``agent_shutdown`` is emitted by the
runner when the run ends.

A deny at the tool seam becomes an error the model sees, and the loop goes on; a deny anywhere
else stops the run (status ``blocked``) with nothing of the denied content kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired, Protocol, TypedDict

from agent_hooks import InterceptionBlocked, Interceptor
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.constants import TAG_NOSTREAM
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.pregel import Pregel
from langgraph.types import Command, Send

from approvals.policy import check_policies_tool_names
from graphs.hooks.approval import ApprovalSlot
from graphs.hooks.governance import Governance, Session, session_of
from graphs.hooks.interceptors import EscalateSensitiveTools
from graphs.langchain.history import call_counts, from_wire, refusals, to_wire, tool_counts
from graphs.run.admission import (
    InputGate,
    blocked_reason,
    emit_input,
    emit_startup,
    point_slot,
    register_gate,
)
from graphs.run.config import EngineRun
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.step import ToolStep, control_error
from graphs.tool_call.tools import GovernedTool


class ChatModel(Protocol):
    """Anything that answers a message list with an ``AIMessage`` (tools already bound)."""

    async def ainvoke(self, messages: list[BaseMessage], /) -> BaseMessage: ...


class AgentState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    run_id: str
    started_by: str
    #: Set by whoever adds a user message that nobody governed yet: ``start`` governs it
    #: (agent_startup, input). The runner governs a new message before the graph runs
    #: (``graphs.run.admission``) and sets it only for an input that waits for a human.
    new_input: NotRequired[bool]
    #: ``agent_startup`` was already emitted for the new message (by the runner).
    startup_emitted: NotRequired[bool]
    #: Why the run stopped, when a policy denied its input, a model call or its answer.
    blocked: NotRequired[dict[str, Any] | None]


class ToolTask(TypedDict):
    call: dict[str, Any]
    run_id: str
    started_by: str
    tool_counts: dict[str, int]
    #: Set when the call is refused before it reaches the tool seam: the error the model gets.
    refused: NotRequired[dict[str, Any] | None]


AgentGraph = CompiledStateGraph[AgentState, None, AgentState, AgentState]


def build_agent(
    *,
    name: str,
    model: ChatModel,
    tools: Sequence[GovernedTool],
    deps: GraphDeps,
    interceptors: Sequence[Interceptor] | None = None,
    governance: Governance | None = None,
    model_id: str | None = None,
) -> AgentGraph:
    """Compile a governed agent.

    ``governance`` says how every interception is evaluated; ``interceptors`` is shorthand for
    a governance with just those (in the default profile). Without either, every tool marked
    sensitive escalates and everything else is allowed."""
    if governance is None:
        if interceptors is None:
            interceptors = [EscalateSensitiveTools(t.name for t in tools if t.sensitive)]
        governance = Governance(interceptors=tuple(interceptors))
    step = ToolStep(graph_name=name, tools=tools, deps=deps)
    check_policies_tool_names(governance.interceptors, (t.name for t in tools), graph=name)
    deps.catalog.register(name, tools, governance)
    nodes = _AgentNodes(
        name=name,
        model=model,
        model_id=model_id or getattr(model, "model_name", None) or type(model).__name__,
        tool_names=sorted(t.name for t in tools),
        gov=governance,
        deps=deps,
        step=step,
    )
    builder = StateGraph(AgentState)
    builder.add_node("start", nodes.start)
    builder.add_node("agent", nodes.agent, destinations=("start",))
    # A Send task takes a ToolTask, not the graph state; the stubs only know the latter.
    builder.add_node("tools", nodes.run_tool)  # type: ignore[arg-type]
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("start", nodes.after_start, ["agent", END])
    builder.add_conditional_edges("agent", nodes.route, ["tools", END])
    builder.add_edge("tools", "agent")
    compiled = builder.compile(checkpointer=deps.checkpointer, name=name)
    register_gate(
        compiled, InputGate(graph=name, governance=governance, tools=tuple(nodes.tool_names))
    )
    return compiled


@dataclass(frozen=True, kw_only=True, slots=True)
class _AgentNodes:
    """The nodes and routers of one agent ``build_agent`` compiles."""

    name: str
    model: ChatModel
    model_id: str
    tool_names: list[str]
    gov: Governance
    deps: GraphDeps
    step: ToolStep

    def session(self, state: AgentState, config: RunnableConfig) -> Session:
        return session_of(
            config, self.gov, graph=self.name, run_id=state["run_id"], principal=state["started_by"]
        )

    def slot(
        self,
        state: AgentState,
        config: RunnableConfig,
        point: str,
        turn: int,
        shown: dict[str, Any],
    ) -> ApprovalSlot:
        """Where a liftable deny at a non-tool point gets its human answer: a request for the
        point of this turn (no edits: only the tool seam's arguments have a schema), made only
        if the emission asks for one.

        No slot when the content has no identity (outside the I-JSON domain, §4.4): the
        emitter denies that context itself (``host_error:context_invalid``), so there is
        nothing to ask a human, and the run must be blocked, not fail."""
        configurable = config.get("configurable") or {}
        run = EngineRun(
            run_id=state["run_id"],
            principal=state["started_by"],
            graph=self.name,
            thread_id=str(configurable.get("thread_id")),
            deps=self.deps,
            state_version=(configurable.get("checkpoint_map") or {}).get(""),
        )
        return point_slot(run, point, turn, shown)

    async def start(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        if not state.get("new_input"):
            return {}
        s = self.session(state, config)
        done = {"new_input": False, "startup_emitted": False}
        turn = sum(1 for m in state["messages"] if isinstance(m, HumanMessage))
        if not state.get("startup_emitted"):
            blocked = await emit_startup(s, self.tool_names)
            if blocked is not None:
                return {**done, "blocked": blocked}
        human = next((m for m in reversed(state["messages"]) if isinstance(m, HumanMessage)), None)
        if human is None:
            return done
        here = self.slot(state, config, "input", turn, {"content": human.content})
        content, blocked = await emit_input(s, human.content, here)
        if blocked is not None:
            # The denied input leaves the conversation.
            remove = [RemoveMessage(id=human.id)] if human.id else []
            return {**done, "blocked": blocked, "messages": remove}
        if content != human.content:
            # A transform rewrote the input: the run goes on with the rewritten message.
            return {**done, "messages": [HumanMessage(content=content, id=human.id)]}
        return done

    async def agent(
        self, state: AgentState, config: RunnableConfig
    ) -> dict[str, Any] | Command[str]:
        if state.get("new_input"):
            # A message nobody governed yet goes through ``start`` first. The runner governs
            # every other one before the graph runs, so the graph enters here, not through a
            # routing at its entry: a conditional entry edge cost every run's turn ~0.2-0.4 ms
            # (its own runnable, task and state read), to serve only this rare path.
            return Command(goto="start")
        s = self.session(state, config)
        history: list[BaseMessage] = list(state["messages"])
        turn = sum(1 for m in history if isinstance(m, AIMessage))
        wire = [to_wire(m) for m in history]
        here = self.slot(state, config, "pre_model_call", turn, {"messages": wire[-1:]})
        ctx = s.context("pre_model_call", model_id=self.model_id, messages=wire)
        try:
            await s.emit(ctx, here)
        except InterceptionBlocked as blocked:
            return {"blocked": blocked_reason(blocked)}
        # A transform changes what the model receives.
        sent = history if ctx["messages"] == wire else from_wire(ctx["messages"])
        reply = await self._ask(sent)
        try:
            reply = await self._reviewed(s, state, config, turn, reply)
        except InterceptionBlocked as blocked:
            # The denied response is dropped: it never enters the conversation.
            return {"blocked": blocked_reason(blocked)}
        if reply.tool_calls:
            return {"messages": [reply]}
        # The final answer is buffered: it is released (written to the state, returned to the
        # caller) only once ``output`` allowed it, and as ``output`` left it.
        here = self.slot(state, config, "output", turn, {"content": reply.content})
        ctx = s.context("output", content=reply.content)
        try:
            await s.emit(ctx, here)
        except InterceptionBlocked as blocked:
            return {"blocked": blocked_reason(blocked)}
        final = ctx["output"]["content"]
        return {"messages": [AIMessage(content=final if final is not None else "", id=reply.id)]}

    async def _ask(self, sent: list[BaseMessage]) -> AIMessage:
        """The model's reply to ``sent``."""
        if isinstance(self.model, Runnable):
            # Buffered output: the model's tokens must not stream to the caller (LangGraph's
            # "messages" mode) before post_model_call and output allowed them.
            reply = await self.model.ainvoke(sent, config={"tags": [TAG_NOSTREAM]})
        else:
            reply = await self.model.ainvoke(sent)
        if not isinstance(reply, AIMessage):
            raise TypeError(f"the model answered {type(reply).__name__}, not an AIMessage")
        return reply

    async def _reviewed(
        self,
        s: Session,
        state: AgentState,
        config: RunnableConfig,
        turn: int,
        reply: AIMessage,
    ) -> AIMessage:
        """``reply`` as ``post_model_call`` left it (``InterceptionBlocked`` when denied)."""
        calls = [
            {"id": tc["id"], "name": tc["name"], "args": tc["args"]} for tc in reply.tool_calls
        ]
        response = {"content": reply.content, "tool_calls": calls}
        here = self.slot(state, config, "post_model_call", turn, response)
        ctx = s.context(
            "post_model_call",
            model_id=self.model_id,
            content=reply.content,
            tool_calls=calls,
            finish_reason="tool_calls" if calls else "stop",
        )
        await s.emit(ctx, here)
        answered = ctx["response"]
        if answered["content"] != reply.content or answered["tool_calls"] != calls:
            reply = AIMessage(
                content=answered["content"] if answered["content"] is not None else "",
                tool_calls=answered["tool_calls"] or [],
                id=reply.id,
            )
        return reply

    # The routers are coroutines: LangGraph runs a plain function given as a path in its
    # thread pool (a thread hop per routing, four per approval cycle), a coroutine in-line.
    async def after_start(self, state: AgentState) -> str:
        return END if state.get("blocked") else "agent"

    async def route(self, state: AgentState) -> list[Send] | str:
        if state.get("blocked") or state.get("new_input"):
            # A message nobody governed yet: ``agent`` handed it to ``start``
            # (``Command(goto="start")``), and a Command does not stop the node's own edges.
            # No tool may run beside ``start``, before ``input`` has decided.
            return END
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            counts = tool_counts(state["messages"])
            refused = refusals(state["messages"], last)
            # One task per distinct call id: the model gets exactly one result per id.
            first_of_id = {str(tc["id"]): tc for tc in reversed(last.tool_calls)}
            return [
                Send(
                    "tools",
                    ToolTask(
                        call=dict(first_of_id[call_id]),
                        run_id=state["run_id"],
                        started_by=state["started_by"],
                        tool_counts=call_counts(counts, last, call_id),
                        refused=refused.get(call_id),
                    ),
                )
                for call_id in dict.fromkeys(str(tc["id"]) for tc in last.tool_calls)
            ]
        return END

    async def run_tool(self, task: ToolTask, config: RunnableConfig) -> dict[str, Any]:
        refused = task.get("refused")
        if refused is not None:
            call = task["call"]
            return {"messages": [control_error(str(call["id"]), str(call["name"]), refused)]}
        configurable = config.get("configurable", {})
        thread_id = str(configurable["thread_id"])
        # The checkpoint this step runs from: the state version the approver's decision binds.
        state_version = (configurable.get("checkpoint_map") or {}).get("")
        s = session_of(
            config, self.gov, graph=self.name, run_id=task["run_id"], principal=task["started_by"]
        )
        message = await self.step(
            session=s,
            state_version=state_version,
            call=task["call"],
            run_id=task["run_id"],
            thread_id=thread_id,
            principal=task["started_by"],
            tool_counts=task["tool_counts"],
        )
        return {"messages": [message]}


async def close_cancelled(
    graph: Pregel[Any, Any, Any, Any], config: RunnableConfig, notice: str
) -> bool:
    """Close the steps a cancelled run left waiting on its thread, so that the thread can take
    new input: each call still waiting gets an error result (``cancelled``, with ``notice``),
    and the turn ends with ``notice`` as the assistant's answer. Nothing runs: the state is
    updated as if the waiting steps had ended that way. Calls that finished before the cancel
    keep their results. Returns whether the thread is now free (``False`` for a graph this
    module did not build, or a state it does not recognise).
    """
    state = await graph.aget_state(config)
    waiting = set(state.next)
    if not waiting:
        return True
    if waiting == {"tools"}:
        messages: list[AnyMessage] = list(state.values.get("messages", []))
        for turn in range(len(messages) - 1, -1, -1):
            proposed = messages[turn]
            if isinstance(proposed, AIMessage) and proposed.tool_calls:
                break
        else:
            return False
        # The values include the results of calls whose steps finished before the cancel
        # (still pending writes of the unfinished step): written again, they are kept.
        finished = [m for m in messages[turn + 1 :] if isinstance(m, ToolMessage)]
        answered = {m.tool_call_id for m in finished}
        # One result per distinct id (a turn may repeat one: see ``refusals``).
        calls = {str(tc["id"]): tc["name"] for tc in proposed.tool_calls}
        cancelled = [
            control_error(call_id, tool, {"code": "cancelled", "message": notice})
            for call_id, tool in calls.items()
            if call_id not in answered
        ]
        await graph.aupdate_state(config, {"messages": [*finished, *cancelled]}, as_node="tools")
        waiting = set((await graph.aget_state(config)).next)
    if waiting in ({"agent"}, {"model"}):
        # ("model": a create_agent agent's model node, under ApprovalMiddleware.)
        (node,) = waiting
        await graph.aupdate_state(config, {"messages": [AIMessage(content=notice)]}, as_node=node)
        after = set((await graph.aget_state(config)).next)
        if len(after) == 1 and next(iter(after)).endswith(".after_model"):
            # ApprovalMiddleware's after_model (HumanInTheLoopMiddleware's hook) follows the
            # model: the answer has no tool call, so passing it ends the turn.
            await graph.aupdate_state(config, None, as_node=next(iter(after)))
    elif len(waiting) == 1 and next(iter(waiting)).endswith(".before_agent"):
        # A create_agent agent whose input waits for a human (graphs.langchain.middleware): it ends.
        (node,) = waiting
        blocked = {"point": "input", "reason": "cancelled", "message": notice}
        ended = {"approvals_new_input": False, "approvals_blocked": blocked, "jump_to": "end"}
        await graph.aupdate_state(config, ended, as_node=node)
    elif waiting == {"start"}:
        blocked = {"point": "input", "reason": "cancelled", "message": notice}
        ended = {"new_input": False, "startup_emitted": False, "blocked": blocked}
        await graph.aupdate_state(config, ended, as_node="start")
    else:
        return False
    return not (await graph.aget_state(config)).next
