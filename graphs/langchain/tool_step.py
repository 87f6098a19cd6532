"""One call of a LangChain tool (``ToolNode``'s handler) through the engine's tool step, for
``ApprovalMiddleware``'s tool seam: the call's validation, governance, pause and single
execution, and the message, the ``Command`` and the decision that come back."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command
from pydantic import BaseModel

from approvals.model import DecisionRecord
from graphs.hooks.governance import Governance, session_of
from graphs.langchain.history import call_counts, refusals, tool_counts
from graphs.langchain.host_state import messages_of
from graphs.langchain.tool_answers import (
    as_model_sees,
    command_result,
    recorded_command,
    result_of,
    with_message,
)
from graphs.langchain.tools import governed_view
from graphs.run.config import EngineRun
from graphs.tool_call.step import ToolStep, control_error
from graphs.tool_call.tools import GovernedTool, ToolCall

Handler = Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]


async def lc_tool_step(
    request: ToolCallRequest,
    handler: Handler,
    run: EngineRun,
    config: RunnableConfig,
    *,
    governance: Governance,
    governed: GovernedTool | None,
    args_model: Callable[[BaseTool], type[BaseModel]],
    sensitive: bool,
) -> tuple[ToolMessage | Command[Any], ToolMessage | Command[Any] | None, DecisionRecord | None]:
    """The message for the model, what the tool answered in this process (if it ran here)
    and the decision the call took. ``governed``: the ``GovernedTool`` the request's tool was
    made from (it runs as it is); otherwise the LangChain tool runs through ``handler``,
    validated against ``args_model(tool)``, paused first when ``sensitive``."""
    call = dict(request.tool_call)
    call_id, name = str(call.get("id")), str(call.get("name"))
    messages = messages_of(request.state)
    turn = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    counts = tool_counts(messages)
    if turn is not None and any(str(tc["id"]) == call_id for tc in turn.tool_calls):
        refused = refusals(messages, turn).get(call_id)
        if refused is not None:
            return control_error(call_id, name, refused), None, None
        counts = call_counts(counts, turn, call_id)
    tool = request.tool
    tools = []
    #: What the tool answered in this process: a ``Command``'s state update is applied
    #: with the result the step releases.
    answers: list[ToolMessage | Command[Any]] = []
    decided: list[DecisionRecord] = []
    if governed is not None:
        tools.append(governed)
    elif tool is not None:
        tools.append(
            _through_handler(request, handler, tool, args_model(tool), sensitive, answers, decided)
        )
    step = ToolStep(graph_name=run.graph, tools=tools, deps=run.deps)
    session = session_of(
        config, governance, graph=run.graph, run_id=run.run_id, principal=run.principal
    )
    message = await step(
        session=session,
        call=call,
        run_id=run.run_id,
        thread_id=run.thread_id,
        principal=run.principal,
        state_version=run.state_version,
        tool_counts=counts,
        decided=decided,
    )
    released = as_model_sees(message)
    raw = answers[0] if answers else None
    decision = decided[0] if decided else None
    if released.status == "error":
        # A withheld or failed result applies no state update either.
        return released, raw, decision
    command: Command[Any] | None = None
    if isinstance(raw, Command):
        command = raw if isinstance(raw.update, dict) else None
    elif raw is None and governed is None and tool is not None:
        # The tool did not run here: the ledger answered for a call that ran in an earlier
        # attempt of this step (another call of the task paused it, or its process died
        # before it was checkpointed), whose output, the tool's Command with it, was lost.
        command = await recorded_command(run.deps, run.run_id, call_id)
    if command is None:
        return released, raw, decision
    return with_message(command, released), raw, decision


def _through_handler(
    request: ToolCallRequest,
    handler: Handler,
    tool: BaseTool,
    model: type[BaseModel],
    sensitive: bool,
    answers: list[ToolMessage | Command[Any]],
    decided: list[DecisionRecord],
) -> GovernedTool:
    """``tool`` as the step runs it: through ``handler`` (ToolNode's execution), which gets the
    call's idempotency key and the arguments as they were sent; what it answers is kept in
    ``answers``. ``decided``: the decisions the step took (an edit's arguments as sent)."""
    call_id = str(request.tool_call.get("id"))

    def as_sent(args: dict[str, Any]) -> dict[str, Any]:
        """The arguments as the model (or the editor) sent them, when they validate to
        ``args``: the tool validates its arguments itself, and a validator that rewrites a
        value must not run twice."""
        sent = [request.tool_call.get("args"), *(d.args for d in decided if d.args)]
        for candidate in sent:
            if not isinstance(candidate, dict):
                continue
            try:
                if model.model_validate(candidate).model_dump(mode="json") == args:
                    return candidate
            except ValueError:
                continue
        return args

    async def execute(args: dict[str, Any], tool_call: ToolCall) -> Any:
        # The idempotency key reaches a tool that takes ``runtime: ToolRuntime`` as
        # ``runtime.config["metadata"]["idempotency_key"]``, to pass to the systems it calls
        # (the same for every attempt at this call, in any process).
        runtime = request.runtime
        metadata = {
            **(runtime.config.get("metadata") or {}),
            "idempotency_key": tool_call.idempotency_key,
        }
        keyed = dataclasses.replace(runtime, config={**runtime.config, "metadata": metadata})
        answer = await handler(
            # (``override`` does not take the runtime; the request is a dataclass.)
            dataclasses.replace(
                request, tool_call={**request.tool_call, "args": as_sent(args)}, runtime=keyed
            )
        )
        answers.append(answer)
        if isinstance(answer, Command):
            return command_result(answer, call_id)
        return result_of(answer)

    return governed_view(tool, execute, sensitive=sensitive, args_model=model)
