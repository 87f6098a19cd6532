"""A ``create_agent`` structured answer (``response_format``) under ``ApprovalMiddleware``.

A structured answer ends the agent like a final text answer, so it passes the ``output`` point
as one: its policies judge the answer as JSON values (a pydantic model, dataclass or typed dict
dumped; a JSON-schema answer as it is), and a transform's result is parsed back through the
answer's own type, then written everywhere the answer shows in the conversation, so no copy of
the answer the policy rewrote survives in the state:

- ``ToolStrategy``: the model's call of the schema's tool (its arguments), and the tool message
  that confirms it when that message quotes the answer (langchain's default text);
- ``ProviderStrategy``: the model message's content, which is the answer's JSON text.

A ``post_model_call`` transform of that call or content changes the answer the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from pydantic import TypeAdapter, ValidationError

#: What langchain's ``ToolStrategy`` tells the model by default, with the answer in it.
_CONFIRMED = "Returning structured response: {}"


class StructuredAnswerRefused(ValueError):
    """A policy rewrote a structured answer into one its own type refuses."""


@dataclass(frozen=True, slots=True)
class StructuredAnswer:
    """The turn's structured answer, and where the conversation holds it."""

    answer: Any
    #: The id of the model's call of the schema's tool (``ToolStrategy``); ``None`` when the
    #: model answered in its content (``ProviderStrategy``).
    call_id: str | None

    @classmethod
    def of(cls, answer: Any, result: list[BaseMessage]) -> StructuredAnswer:
        confirmed = [m.tool_call_id for m in result if isinstance(m, ToolMessage)]
        return cls(answer=answer, call_id=confirmed[0] if confirmed else None)

    @property
    def value(self) -> Any:
        """The answer as JSON values: what ``output`` policies see."""
        if isinstance(self.answer, dict):
            return self.answer
        return TypeAdapter(type(self.answer)).dump_python(self.answer, mode="json")

    @property
    def text(self) -> str:
        """The answer as JSON text: a finished run's answer."""
        return json.dumps(self.value, ensure_ascii=False, sort_keys=True)

    def released(self, reply: AIMessage) -> Any:
        """The answer's value as ``reply`` (the model's message once ``post_model_call``
        released it) carries it; ``StructuredAnswerRefused`` when it no longer does."""
        if self.call_id is None:
            try:
                return json.loads(str(reply.content))
            except ValueError as exc:
                raise StructuredAnswerRefused(
                    "post_model_call left the structured answer no longer JSON"
                ) from exc
        for call in reply.tool_calls:
            if call["id"] == self.call_id:
                return call["args"]
        raise StructuredAnswerRefused("post_model_call removed the structured answer's call")

    def parsed(self, value: Any) -> Any:
        """``value`` as an answer of this answer's type (``value`` itself for a JSON-schema
        answer, which must stay an object)."""
        if isinstance(self.answer, dict):
            if not isinstance(value, dict):
                raise StructuredAnswerRefused(
                    f"a policy made the structured answer a {type(value).__name__}, not an object"
                )
            return value
        try:
            return TypeAdapter(type(self.answer)).validate_python(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = "/".join(str(p) for p in first["loc"]) or "the answer"
            raise StructuredAnswerRefused(
                f"a policy rewrote the structured answer into one its type "
                f"{type(self.answer).__name__} refuses ({where}: {first['msg']})"
            ) from exc

    def rewritten(
        self, result: list[BaseMessage], reply: AIMessage, value: Any, answer: Any
    ) -> list[BaseMessage]:
        """``result`` (the model call's messages, ``reply`` standing for the model's message)
        with the answer's copies replaced by ``value`` (parsed: ``answer``)."""
        old = self.answer
        if self.call_id is None:
            reply = AIMessage(content=json.dumps(value), id=reply.id)
        else:
            calls = [
                {**call, "args": value} if call["id"] == self.call_id else call
                for call in reply.tool_calls
            ]
            reply = AIMessage(content=reply.content, tool_calls=calls, id=reply.id)
        out: list[BaseMessage] = []
        for m in result:
            if isinstance(m, AIMessage):
                out.append(reply)
            elif (
                isinstance(m, ToolMessage)
                and m.tool_call_id == self.call_id
                and m.content == _CONFIRMED.format(old)
            ):
                out.append(
                    ToolMessage(
                        content=_CONFIRMED.format(answer),
                        tool_call_id=m.tool_call_id,
                        name=m.name,
                        id=m.id,
                    )
                )
            else:
                out.append(m)
        return out
