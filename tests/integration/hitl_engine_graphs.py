"""``create_agent`` agents for HumanInTheLoopMiddleware's decision-outcome tests, run through the
engine (``tests/integration/test_hitl_through_engine.py``): the tools those tests call, each
writing every real invocation to the examples' side-effect log, behind ``ApprovalMiddleware``
configured as a HITL user configures ``HumanInTheLoopMiddleware``.

The scripted model proposes the tool calls its user message lists (JSON, all in one turn), and
once their results are in it answers with what it got back: each result's call id, tool,
status, content and ``additional_kwargs``, in the order it received them. A run's answer is
then exactly what the model saw."""

from __future__ import annotations

import json
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, tool
from langgraph.prebuilt import ToolRuntime
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.pregel import Pregel

from graphs import ApprovalMiddleware
from graphs.examples.effects import side_effects
from graphs.examples.scripted import ScriptedToolModel
from graphs.run.config import RUN_ID_KEY
from graphs.tool_call.deps import GraphDeps

#: The description prefix of the batched agent (HITL's interrupt-structure test sets one).
PREFIX = "A person looks first"
#: The edit notice of the agent that words its own (``edit_notice=``).
OWN_NOTICE = "Operator overrode these args."
THREE: dict[str, Any] = {"allowed_decisions": ["approve", "edit", "reject"]}


def calls_input(*calls: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    """The run input that makes the model propose ``calls`` (id, tool, args), in one turn."""
    listed = [{"id": call_id, "name": name, "args": args} for call_id, name, args in calls]
    return {"message": json.dumps(listed)}


def _received(message: ToolMessage) -> dict[str, Any]:
    return {
        "id": message.tool_call_id,
        "name": message.name,
        "status": message.status,
        "content": message.content,
        "additional_kwargs": message.additional_kwargs,
    }


def script(messages: list[BaseMessage]) -> AIMessage:
    """The calls the latest user message lists; once answered, the answers as JSON."""
    asked, results = "[]", list[ToolMessage]()
    for m in messages:
        if isinstance(m, HumanMessage):
            asked, results = str(m.content), []
        elif isinstance(m, ToolMessage):
            results.append(m)
    if results:
        return AIMessage(content=json.dumps([_received(r) for r in results]))
    return AIMessage(content="", tool_calls=json.loads(asked))


async def _ran(deps: GraphDeps, runtime: ToolRuntime, name: str, args: dict[str, Any]) -> None:
    await side_effects(deps).record(
        run_id=runtime.config["configurable"][RUN_ID_KEY],
        call_id=str(runtime.tool_call_id),
        tool=name,
        args=args,
    )


def _lettered(deps: GraphDeps, letter: str) -> BaseTool:
    name = f"tool_{letter}"

    async def step(val: int, runtime: ToolRuntime) -> str:
        await _ran(deps, runtime, name, {"val": val})
        return f"{name} ran with {val}"

    return StructuredTool.from_function(
        coroutine=step, name=name, description=f"Step {letter.upper()} of a batch."
    )


def _send_email(deps: GraphDeps, *, with_cc: bool) -> BaseTool:
    """``send_email(to)``, as in HITL's tests of each decision; ``with_cc``: with an optional
    ``cc``, as in its per-call test."""

    @tool("send_email")
    async def to_only(to: str, runtime: ToolRuntime) -> str:
        """Send an email."""
        await _ran(deps, runtime, "send_email", {"to": to})
        return f"sent to {to}"

    @tool("send_email")
    async def with_copy(to: str, runtime: ToolRuntime, cc: str | None = None) -> str:
        """Send an email."""
        await _ran(deps, runtime, "send_email", {"to": to, "cc": cc})
        return f"sent to {to}"

    return with_copy if with_cc else to_only


def _tools(deps: GraphDeps, *, with_cc: bool = False) -> list[BaseTool]:
    @tool
    async def get_forecast(location: str, runtime: ToolRuntime) -> str:
        """The weather forecast for a place."""
        await _ran(deps, runtime, "get_forecast", {"location": location})
        return f"forecast for {location}: sunny"

    @tool
    async def get_temperature(location: str, runtime: ToolRuntime) -> str:
        """The temperature at a place."""
        await _ran(deps, runtime, "get_temperature", {"location": location})
        return f"temperature in {location}: 21C"

    @tool
    async def ask_user(question: str, runtime: ToolRuntime) -> str:
        """Ask the user a question; a person answers in the tool's place."""
        # Never meant to run: a person answers it (respond is its only decision).
        await _ran(deps, runtime, "ask_user", {"question": question})
        return "the stub ran"

    @tool
    async def delete_file(path: str, runtime: ToolRuntime) -> str:
        """Delete a file."""
        await _ran(deps, runtime, "delete_file", {"path": path})
        return f"deleted {path}"

    @tool
    async def read_file(path: str, runtime: ToolRuntime) -> str:
        """Read a file."""
        await _ran(deps, runtime, "read_file", {"path": path})
        return f"contents of {path}"

    lettered = [_lettered(deps, letter) for letter in "abcde"]
    send_email = _send_email(deps, with_cc=with_cc)
    return [send_email, get_forecast, get_temperature, ask_user, delete_file, read_file, *lettered]


def _agent(
    deps: GraphDeps, middleware: ApprovalMiddleware, *, with_cc: bool = False
) -> Pregel[Any, Any, Any, Any]:
    return create_agent(
        ScriptedToolModel(script=script),
        tools=_tools(deps, with_cc=with_cc),
        middleware=[middleware],
        checkpointer=deps.checkpointer,
        name="hitl_outcomes",
    )


def batched(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """HITL's default (batched) mode: ``send_email`` takes every decision (``True``), the
    weather tools and ``tool_b`` / ``tool_d`` approve, edit or reject, ``ask_user`` only
    respond; the rest run unasked."""
    gates: dict[str, bool | dict[str, Any]] = {
        "send_email": True,
        "get_forecast": THREE,
        "get_temperature": THREE,
        "tool_b": THREE,
        "tool_d": THREE,
        "ask_user": {"allowed_decisions": ["respond"]},
    }
    return _agent(deps, ApprovalMiddleware(interrupt_on=gates, description_prefix=PREFIX))


def not_tmp(request: ToolCallRequest) -> bool:
    """``when``: ``tmp.txt`` is deleted without asking; any other file waits."""
    return bool(request.tool_call["args"]["path"] != "tmp.txt")


PER_CALL_GATES: dict[str, dict[str, Any]] = {
    "send_email": {
        "allowed_decisions": ["approve", "edit", "reject", "respond"],
        "description": "Email",
    },
    "delete_file": {"allowed_decisions": ["approve", "reject"], "when": not_tmp},
}


def per_call(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """``interrupt_mode="per_call"``: ``send_email`` takes every decision and is described as
    "Email"; ``delete_file`` approve or reject, unless ``when`` lets it through."""
    middleware = ApprovalMiddleware(interrupt_on=PER_CALL_GATES, interrupt_mode="per_call")
    return _agent(deps, middleware)


def per_call_cc(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """``per_call`` with ``send_email(to, cc=None)``, as HITL's per-call test has it."""
    middleware = ApprovalMiddleware(interrupt_on=PER_CALL_GATES, interrupt_mode="per_call")
    return _agent(deps, middleware, with_cc=True)


def own_notice(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """An edit notice of the agent's own wording (``edit_notice=``)."""
    middleware = ApprovalMiddleware(interrupt_on={"send_email": THREE}, edit_notice=OWN_NOTICE)
    return _agent(deps, middleware)


def no_notice(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    """No edit notice (``edit_notice=None``): an edited call's result is the tool's alone."""
    return _agent(deps, ApprovalMiddleware(interrupt_on={"send_email": THREE}, edit_notice=None))
