"""A scripted chat model: deterministic replies computed from the conversation so far.

The example graphs use it so they run without an LLM or an API key. The reply is a pure
function of the messages, so re-running a node after a crash gives the same answer.
"""

from __future__ import annotations

from collections.abc import Callable

from langchain_core.messages import AIMessage, BaseMessage

Script = Callable[[list[BaseMessage]], AIMessage]


class ScriptedChatModel:
    def __init__(self, script: Script) -> None:
        self._script = script

    async def ainvoke(self, messages: list[BaseMessage], /) -> AIMessage:
        return self._script(messages)
