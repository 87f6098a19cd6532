"""A conformance vector's scenario as our graph takes it: a scripted chat model and governed
tools that replay the vector's scripts.

The model's reply is a pure function of the conversation (the n-th assistant turn answers with
the n-th scripted response), so a node that runs again after a pause gets the same reply.
"""

from __future__ import annotations

from typing import Any

from agent_hooks.ctk import Scenario
from agent_hooks.ctk.harness import ToolSpec
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel, ConfigDict

from graphs.examples.scripted import Script, ScriptedChatModel
from graphs.tool_call.tools import GovernedTool, ToolCall


class ModelScriptExhausted(RuntimeError):
    """The graph asked the model more often than the vector scripted."""


class ScriptedToolError(RuntimeError):
    """A scripted tool behaviour that returns an error (``is_error``)."""


class VectorArgs(BaseModel):
    """The arguments of a vector's tool. A vector's ``schema`` is an informal note (name to
    type word), not a JSON schema, so every JSON object is accepted as it is."""

    model_config = ConfigDict(extra="allow")


def scripted_model(scenario: Scenario) -> ScriptedChatModel:
    return ScriptedChatModel(scripted_reply(scenario))


def scripted_reply(scenario: Scenario) -> Script:
    """The vector's model script as a function of the conversation."""
    responses = list(scenario.model_script)

    def reply(messages: list[BaseMessage]) -> AIMessage:
        turn = sum(1 for m in messages if isinstance(m, AIMessage))
        if turn >= len(responses):
            raise ModelScriptExhausted(
                f"model call {turn + 1}; the vector scripts {len(responses)}"
            )
        response = responses[turn]
        return AIMessage(
            # LangChain messages carry "" for "no content"; the vector's null reads as that.
            content=response.content if response.content is not None else "",
            tool_calls=[
                {"id": tc["id"], "name": tc["name"], "args": tc["args"], "type": "tool_call"}
                for tc in response.tool_calls
            ],
        )

    return reply


def scripted_tools(scenario: Scenario, invocations: list[dict[str, Any]]) -> list[GovernedTool]:
    """One governed tool per scripted tool; each real invocation is appended to
    ``invocations`` with the arguments the tool received."""
    return [_tool(spec, invocations) for spec in scenario.tools.values()]


def _tool(spec: ToolSpec, invocations: list[dict[str, Any]]) -> GovernedTool:
    async def run(args: BaseModel, call: ToolCall) -> Any:
        received = args.model_dump(mode="json")
        invocations.append({"name": spec.name, "args": received})
        value, is_error = spec.invoke(received)
        if is_error:
            raise ScriptedToolError(str(value))
        return value

    return GovernedTool(
        name=spec.name,
        description=f"scripted conformance tool {spec.name}",
        args_model=VectorArgs,
        fn=run,
    )
