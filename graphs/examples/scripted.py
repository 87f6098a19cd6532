"""A scripted chat model: deterministic replies computed from the conversation so far.

The example graphs use it so they run without an LLM or an API key. The reply is a pure
function of the messages, so re-running a node after a crash gives the same answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable

Script = Callable[[list[BaseMessage]], AIMessage]


class ScriptedChatModel:
    def __init__(self, script: Script) -> None:
        self._script = script

    async def ainvoke(self, messages: list[BaseMessage], /) -> AIMessage:
        return self._script(messages)


class ScriptedToolModel(BaseChatModel):
    """The same kind of script as a LangChain chat model, for hosts that need one (langchain's
    ``create_agent``, ``create_react_agent``): it accepts ``bind_tools`` (the script already
    knows the tools it calls) and answers with the script's message."""

    script: Script
    #: What ``model_id`` policies see for it.
    model_name: str = "scripted"

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(
        self,
        tools: Sequence[Any],
        *,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.script(list(messages)))])
