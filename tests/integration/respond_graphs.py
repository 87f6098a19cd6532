"""An ask-a-human agent: a ``create_agent`` agent whose ``ask_manager`` tool is answered by a
person (``allowed_decisions`` respond and reject, as ``HumanInTheLoopMiddleware`` takes it).
The tool's own body only records that it ran: under respond it never should."""

from __future__ import annotations

from typing import Annotated, Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.prebuilt import ToolRuntime
from langgraph.pregel import Pregel

from approvals.policy import parse_policy
from graphs import ApprovalMiddleware
from graphs.examples.effects import side_effects
from graphs.examples.scripted import ScriptedToolModel
from graphs.run.config import RUN_ID_KEY
from graphs.tool_call.deps import GraphDeps


def ask_script(messages: list[BaseMessage]) -> AIMessage:
    """``ask QUESTION``: one ``ask_manager`` call; then the tool's answer, verbatim, with its
    status (what the model received)."""
    question, results = "", list[ToolMessage]()
    for m in messages:
        if isinstance(m, HumanMessage):
            question, results = str(m.content).removeprefix("ask "), []
        elif isinstance(m, ToolMessage):
            results.append(m)
    if results:
        return AIMessage(content=" | ".join(f"{r.status}: {r.content}" for r in results))
    return AIMessage(
        content="",
        tool_calls=[{"id": "ask-1", "name": "ask_manager", "args": {"question": question}}],
    )


def build(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    @tool
    async def ask_manager(
        question: str,
        tool_call_id: Annotated[str, InjectedToolCallId],
        runtime: ToolRuntime,
    ) -> str:
        """Ask the manager a question; the manager's answer comes back."""
        # A stub: the answer is a person's. Recorded so a test can see it never runs.
        await side_effects(deps).record(
            run_id=runtime.config["configurable"][RUN_ID_KEY],
            call_id=tool_call_id,
            tool="ask_manager",
            args={"question": question},
        )
        return "the stub ran"

    gate = {"allowed_decisions": ["respond", "reject"], "description": "The agent asks you"}
    return create_agent(
        ScriptedToolModel(script=ask_script),
        tools=[ask_manager],
        middleware=[ApprovalMiddleware(interrupt_on={"ask_manager": gate})],
        checkpointer=deps.checkpointer,
        name="lc_ask",
    )


#: The same question raised by a policy file's rule instead of ``interrupt_on``.
ASK_POLICY = """\
policy: ask
default: allow
rules:
  - id: manager-answers
    point: pre_tool_call
    tool: ask_manager
    action: escalate
    approvers: [managers]
    allowed_decisions: [respond, reject]
"""


def build_by_policy(deps: GraphDeps) -> Pregel[Any, Any, Any, Any]:
    @tool
    async def ask_manager(question: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Ask the manager a question; the manager's answer comes back."""
        return "the stub ran"

    return create_agent(
        ScriptedToolModel(script=ask_script),
        tools=[ask_manager],
        middleware=[ApprovalMiddleware(policy=parse_policy(ASK_POLICY, "ask.yaml"))],
        checkpointer=deps.checkpointer,
        name="lc_ask_policy",
    )
