"""The model seam of ``ApprovalMiddleware`` (``graphs.langchain.middleware``): ``pre_model_call``,
the model, ``post_model_call`` and, for a final answer (text or structured), ``output``. A deny ends
the run, blocked. ``ApprovalMiddleware`` inherits it, so the hooks are where ``create_agent``
looks for them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from agent_hooks import InterceptionBlocked
from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelCallResult,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.config import get_config
from langgraph.constants import TAG_NOSTREAM
from langgraph.types import Command

from graphs.hooks.governance import Governance, Session, session_of
from graphs.langchain.history import from_wire, to_wire
from graphs.langchain.host_state import BLOCKED
from graphs.langchain.in_process import run_sync
from graphs.run.admission import blocked_reason, point_slot
from graphs.run.config import EngineRun
from graphs.run.structured import StructuredAnswer, StructuredAnswerRefused

ASYNC_ONLY = (
    "ApprovalMiddleware is asynchronous: the approvals engine runs the agent with ainvoke/astream"
)


class ModelSeam(AgentMiddleware[AgentState[Any], Any, Any]):
    """The model calls of an ``ApprovalMiddleware`` agent, governed."""

    #: What governs the calls (``ApprovalMiddleware`` assembles it).
    governance: Governance

    def _run_of(self, config: RunnableConfig) -> EngineRun | None:
        """The run the model call belongs to; ``None``: nothing governs model calls here."""
        return EngineRun.of(config)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult[Any]:
        """Synchronous agents (``invoke``) run in-process: a model call nothing governs goes
        straight to the model; a governed one runs the asynchronous seam."""
        try:
            config = get_config()
        except RuntimeError:
            return handler(request)
        if self._run_of(config) is None:
            return handler(request)

        async def model(r: ModelRequest[Any]) -> ModelResponse[Any]:
            return handler(r)

        async def seam() -> ModelCallResult[Any]:
            return await self.awrap_model_call(request, model)

        # (An ApprovalMiddleware's LocalApprovals on a database: its steps run in its loop.)
        return run_sync(seam, getattr(getattr(self, "local", None), "loop", None))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        """``pre_model_call`` (a transform changes what the model receives), the model,
        ``post_model_call`` (a transform changes the response; a denied one never enters the
        conversation) and, for a final answer, ``output`` (the answer enters the state only
        once ``output`` allowed it, as ``output`` left it). A deny ends the run, blocked."""
        config = get_config()
        run = self._run_of(config)
        if run is None:
            return await handler(request)
        session = session_of(
            config, self.governance, graph=run.graph, run_id=run.run_id, principal=run.principal
        )
        model = request.model
        model_id = str(
            getattr(model, "model_name", None)
            or getattr(model, "model", None)
            or type(model).__name__
        )
        history: list[BaseMessage] = list(request.messages)
        turn = sum(1 for m in history if isinstance(m, AIMessage))
        asked = await _pre_model_call(session, run, request, history, model_id, turn)
        if isinstance(asked, ExtendedModelResponse):
            return asked
        answered = await _unstreamed(handler, asked)
        response = (
            answered.model_response if isinstance(answered, ExtendedModelResponse) else answered
        )
        replies = [m for m in response.result if isinstance(m, AIMessage)]
        if len(replies) != 1:
            # Structured output through a tool, or a model answering twice: not governed yet.
            raise TypeError(
                f"the model answered {len(replies)} messages; ApprovalMiddleware governs one"
            )
        reply = await _post_model_call(session, run, model_id, turn, replies[0])
        if isinstance(reply, ExtendedModelResponse):
            return reply
        if response.structured_response is not None:
            structured = StructuredAnswer.of(response.structured_response, response.result)
            kept = await _structured_output(
                session, run, turn, structured, response.result, reply, replies[0]
            )
            if isinstance(kept, ExtendedModelResponse) or not isinstance(
                answered, ExtendedModelResponse
            ):
                return kept
            return ExtendedModelResponse(model_response=kept, command=answered.command)
        if not reply.tool_calls:
            reply = await _final_output(session, run, turn, reply)
            if isinstance(reply, ExtendedModelResponse):
                return reply
        result = [reply if m is replies[0] else m for m in response.result]
        kept = ModelResponse(result=result, structured_response=response.structured_response)
        if isinstance(answered, ExtendedModelResponse):
            return ExtendedModelResponse(model_response=kept, command=answered.command)
        return kept


async def _pre_model_call(
    session: Session,
    run: EngineRun,
    request: ModelRequest[Any],
    history: list[BaseMessage],
    model_id: str,
    turn: int,
) -> ModelRequest[Any] | ExtendedModelResponse[Any]:
    """``pre_model_call``: the request as the policies leave it (a transform changes what the
    model receives), or the stopped run a deny makes."""
    wire = [to_wire(m) for m in history]
    here = point_slot(run, "pre_model_call", turn, {"messages": wire[-1:]})
    ctx = session.context("pre_model_call", model_id=model_id, messages=wire)
    try:
        await session.emit(ctx, here)
    except InterceptionBlocked as blocked:
        return _stopped(session, blocked_reason(blocked))
    if ctx["messages"] != wire:
        request = request.override(messages=cast(list[AnyMessage], from_wire(ctx["messages"])))
    return request


async def _unstreamed(
    handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    request: ModelRequest[Any],
) -> ModelResponse[Any]:
    """The model's answer, buffered as build_agent's model node: not streamed (LangGraph's
    "messages" mode) as it is generated, only with the model node's update, once
    post_model_call and output allowed it (a denied answer reaches no one)."""
    parent = var_child_runnable_config.get() or {}
    token = var_child_runnable_config.set(
        {**parent, "tags": [*(parent.get("tags") or []), TAG_NOSTREAM]}
    )
    try:
        return await handler(request)
    finally:
        var_child_runnable_config.reset(token)


async def _post_model_call(
    session: Session, run: EngineRun, model_id: str, turn: int, reply: AIMessage
) -> AIMessage | ExtendedModelResponse[Any]:
    """``post_model_call``: the model's reply as the policies leave it (a transform changes the
    response), or the stopped run a deny makes (a denied reply never enters the
    conversation)."""
    calls = [{"id": tc["id"], "name": tc["name"], "args": tc["args"]} for tc in reply.tool_calls]
    shown = {"content": reply.content, "tool_calls": calls}
    here = point_slot(run, "post_model_call", turn, shown)
    ctx = session.context(
        "post_model_call",
        model_id=model_id,
        content=reply.content,
        tool_calls=calls,
        finish_reason="tool_calls" if calls else "stop",
    )
    try:
        await session.emit(ctx, here)
    except InterceptionBlocked as blocked:
        return _stopped(session, blocked_reason(blocked))
    released = ctx["response"]
    if released["content"] != reply.content or released["tool_calls"] != calls:
        reply = AIMessage(
            content=released["content"] if released["content"] is not None else "",
            tool_calls=released["tool_calls"] or [],
            id=reply.id,
        )
    return reply


async def _final_output(
    session: Session, run: EngineRun, turn: int, reply: AIMessage
) -> AIMessage | ExtendedModelResponse[Any]:
    """``output`` for a final text answer: the answer as the policies leave it, or the stopped
    run a deny makes."""
    here = point_slot(run, "output", turn, {"content": reply.content})
    ctx = session.context("output", content=reply.content)
    try:
        await session.emit(ctx, here)
    except InterceptionBlocked as blocked:
        return _stopped(session, blocked_reason(blocked))
    final = ctx["output"]["content"]
    if final != reply.content:
        reply = AIMessage(content=final if final is not None else "", id=reply.id)
    return reply


async def _structured_output(
    session: Session,
    run: EngineRun,
    turn: int,
    structured: StructuredAnswer,
    result: list[BaseMessage],
    reply: AIMessage,
    original: AIMessage,
) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
    """A structured answer (``response_format``) through ``output``, as a final text answer
    goes: it enters the state only once ``output`` allowed it, as ``output`` left it
    (``graphs.run.structured``); a rewrite its own type refuses stops the run."""
    try:
        value = structured.value if reply is original else structured.released(reply)
        answer = structured.answer if reply is original else structured.parsed(value)
        here = point_slot(run, "output", turn, {"content": value})
        ctx = session.context("output", content=value)
        try:
            await session.emit(ctx, here)
        except InterceptionBlocked as blocked:
            return _stopped(session, blocked_reason(blocked))
        final = ctx["output"]["content"]
        if final != value:
            value, answer = final, structured.parsed(final)
    except StructuredAnswerRefused as exc:
        return _stopped(
            session, {"point": "output", "reason": "structured_answer_refused", "message": str(exc)}
        )
    if answer is structured.answer:
        kept = [reply if m is original else m for m in result]
    else:
        kept = structured.rewritten(result, reply, value, answer)
    return ModelResponse(result=kept, structured_response=answer)


def _stopped(session: Session, reason: dict[str, Any]) -> ExtendedModelResponse[Any]:
    """A model call a deny stopped: nothing of it enters the conversation, the agent ends, and
    its state and the run's session say why (what the runner settles the run as ``blocked``
    from, also when the agent is a node of another graph)."""
    session.blocked = reason
    return ExtendedModelResponse(
        model_response=ModelResponse(result=[]),
        command=Command(update={BLOCKED: reason, "jump_to": "end"}),
    )
