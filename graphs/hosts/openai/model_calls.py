"""The model calls of an OpenAI Agents SDK run through ``pre_model_call`` and ``post_model_call``,
as ``graphs.langchain.model_seam`` governs a LangGraph agent's. The SDK has no hook that can deny
or rewrite a response before it acts on its tool calls, so the model is wrapped: ``GovernedModel``
emits the points through the run's session (``current_run().session``) around the model.

- ``pre_model_call``: ``messages`` are the instructions (a ``system`` message) and the input
  items (a function call joins its assistant message as ``tool_calls``, its output is a ``tool``
  message, any other item is shown whole with its ``type`` as role). A transform changes what
  the model receives; the messages it left as they were keep their items.
- ``post_model_call``: the answer's text (``None`` without one) and function calls (arguments
  that are not a JSON object show as ``{}``). A transform changes what the SDK acts on: a call
  dropped is never run, a rewritten one goes to ``pre_tool_call`` as rewritten.
- A deny, or an escalation (the SDK cannot pause a model call), stops the run: the model is not
  asked, or its answer never reaches the SDK. ``ModelCallBlocked`` is raised out of
  ``Runner.run`` and ``Session.blocked`` says why. The SDK turns a nested (``as_tool``) agent's
  stop into the tool's error text for the outer agent, so every later model call of the run
  raises it again.
- ``stream_response`` is governed the same way, buffered: nothing of the stream is passed on
  before ``post_model_call`` allowed the answer; a transformed one is passed on as its
  completed event alone.

``governed_run_config`` governs the models a ``RunConfig``'s provider makes (agents naming their
model by a string). Outside an engine run a governed model fails closed, as governed tools do.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from agent_hooks import InterceptionBlocked
from agents import RunConfig
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model, ModelProvider, ModelTracing
from agents.retry import ModelRetryAdvice, ModelRetryAdviceRequest
from agents.tool import Tool
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from openai.types.responses.response_prompt_param import ResponsePromptParam

from graphs.hooks.governance import Session
from graphs.hosts.openai.calls import current_run
from graphs.run.admission import blocked_reason

if TYPE_CHECKING:
    from agents.model_settings import ModelSettings

#: The roles of the input items the SDK sends as messages (``EasyInputMessage``).
MESSAGE_ROLES = ("user", "system", "developer", "assistant")
#: The content parts read as text.
TEXT_PARTS = ("input_text", "output_text")


class ModelCallBlocked(Exception):
    """A deny at a model point stopped the run; ``reason``: why (``blocked_reason``)."""

    def __init__(self, reason: dict[str, Any]) -> None:
        self.reason = reason
        detail = reason.get("message") or reason.get("reason") or "denied"
        super().__init__(f"blocked at {reason.get('point')}: {detail}")


class GovernedModel(Model):
    """``inner``, asked through ``pre_model_call``, answering through ``post_model_call``."""

    def __init__(self, inner: Model, model_id: str | None = None) -> None:
        self._inner = inner
        self.model_id = model_id or _model_id(inner)

    @property
    def inner(self) -> Model:
        return self._inner

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
        **more: Any,
    ) -> ModelResponse:
        session = _session()
        instructions, given = await pre_model_call(
            session, self.model_id, system_instructions, input
        )
        more.update(
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=prompt,
        )
        response = await self._inner.get_response(
            instructions, given, model_settings, tools, output_schema, handoffs, tracing, **more
        )
        output = await post_model_call(session, self.model_id, list(response.output))
        return response if output is None else dataclasses.replace(response, output=output)

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
        **more: Any,
    ) -> AsyncIterator[TResponseStreamEvent]:
        session = _session()
        instructions, given = await pre_model_call(
            session, self.model_id, system_instructions, input
        )
        more.update(
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=prompt,
        )
        stream = self._inner.stream_response(
            instructions, given, model_settings, tools, output_schema, handoffs, tracing, **more
        )
        held: list[TResponseStreamEvent] = []
        done: list[Any] = []
        async for event in stream:
            kind = getattr(event, "type", None)
            if kind == "response.output_item.done":
                done.append(getattr(event, "item", None))
            if isinstance(event, ResponseCompletedEvent):
                answer = event.response
                items = list(answer.output) or [i for i in done if i is not None]
                output = await post_model_call(session, self.model_id, items)
                if output is not None:
                    released = answer.model_copy(update={"output": output})
                    held, event = [], event.model_copy(update={"response": released})
                for kept in (*held, event):
                    yield kept
                return
            if kind in ("response.incomplete", "response.failed", "error", "response.error"):
                # The SDK fails the run on these; nothing of the unreleased answer goes with.
                yield event
                return
            held.append(event)

    def get_retry_advice(self, request: ModelRetryAdviceRequest) -> ModelRetryAdvice | None:
        if isinstance(request.error, ModelCallBlocked):
            return ModelRetryAdvice(suggested=False, reason="a policy stopped the model call")
        return self._inner.get_retry_advice(request)

    async def close(self) -> None:
        await self._inner.close()

    async def _cleanup_on_run_end(self, owner: object) -> None:
        await self._inner._cleanup_on_run_end(owner)

    def _supports_default_prompt_cache_key(self) -> bool:
        supports = getattr(self._inner, "_supports_default_prompt_cache_key", None)
        return bool(supports()) if callable(supports) else False


class GovernedProvider(ModelProvider):
    """A ``ModelProvider`` whose models are governed (``GovernedModel``)."""

    def __init__(self, inner: ModelProvider) -> None:
        self._inner = inner

    def get_model(self, model_name: str | None) -> Model:
        return governed_model(self._inner.get_model(model_name), model_name)

    async def aclose(self) -> None:
        await self._inner.aclose()


def governed_model(model: Model, model_id: str | None = None) -> GovernedModel:
    """``model`` governed (itself when it already is)."""
    return model if isinstance(model, GovernedModel) else GovernedModel(model, model_id)


def governed_run_config(config: RunConfig) -> RunConfig:
    """``config`` with its model provider (models named by a string) and its ``Model``
    governed: what a host passes to ``Runner.run``."""
    provider = config.model_provider
    if not isinstance(provider, GovernedProvider):
        provider = GovernedProvider(provider)
    model = config.model
    if isinstance(model, Model):
        model = governed_model(model)
    return dataclasses.replace(config, model_provider=provider, model=model)


def _session() -> Session:
    """The run's session; a run a model call stopped stays stopped (see the module's doc)."""
    session = current_run().session
    if session.blocked is not None:
        raise ModelCallBlocked(session.blocked)
    return session


def _stopped(session: Session, reason: dict[str, Any]) -> ModelCallBlocked:
    session.blocked = reason
    return ModelCallBlocked(reason)


def _model_id(model: Model) -> str:
    named = getattr(model, "model", None)
    return named if isinstance(named, str) and named else type(model).__name__


async def pre_model_call(
    session: Session,
    model_id: str,
    instructions: str | None,
    given: str | list[TResponseInputItem],
) -> tuple[str | None, str | list[TResponseInputItem]]:
    """``pre_model_call``: the instructions and input as the policies leave them; raises
    ``ModelCallBlocked`` on a deny (the model is not asked)."""
    shown = Conversation.of(instructions, given)
    ctx = session.context("pre_model_call", model_id=model_id, messages=copy.deepcopy(shown.wire))
    try:
        await session.emit(ctx)
    except InterceptionBlocked as blocked:
        raise _stopped(session, blocked_reason(blocked)) from None
    released = ctx["messages"]
    if released == shown.wire:
        return instructions, given
    try:
        return shown.rebuilt(released)
    except ValueError as exc:
        reason = {"point": "pre_model_call", "reason": "transform", "message": str(exc)}
        raise _stopped(session, reason) from None


@dataclasses.dataclass(frozen=True)
class Conversation:
    """What the SDK sends the model, as the contract's ``messages`` (``wire``), with the items
    each message was made from (``groups``) to keep them as they were."""

    wire: list[dict[str, Any]]
    groups: list[list[Any]]
    has_instructions: bool

    @classmethod
    def of(cls, instructions: str | None, given: str | list[Any]) -> Conversation:
        wire: list[dict[str, Any]] = []
        groups: list[list[Any]] = []
        if instructions is not None:
            wire.append({"role": "system", "content": instructions})
            groups.append([])
        items: list[Any] = [{"role": "user", "content": given}] if isinstance(given, str) else given
        for item in items:
            plain = _plain(item)
            kind = plain.get("type", "message") if isinstance(plain, dict) else None
            last = wire[-1] if wire else None
            if kind == "function_call":
                call = _call(plain)
                if last is not None and last["role"] == "assistant" and groups[-1]:
                    last.setdefault("tool_calls", []).append(call)
                    groups[-1].append(item)
                    continue
                wire.append({"role": "assistant", "content": "", "tool_calls": [call]})
            elif kind == "function_call_output":
                output = plain.get("output")
                wire.append(
                    {"role": "tool", "tool_call_id": str(plain.get("call_id")), "content": output}
                )
            elif kind == "message" and plain.get("role") in MESSAGE_ROLES:
                wire.append({"role": plain["role"], "content": _text(plain.get("content"))})
            else:
                wire.append({"role": str(kind), "content": plain})
            groups.append([item])
        return cls(wire=wire, groups=groups, has_instructions=instructions is not None)

    def rebuilt(self, released: Any) -> tuple[str | None, list[TResponseInputItem]]:
        """The instructions and input items for ``released`` (the transformed messages): the
        messages left as they were keep their items."""
        if not isinstance(released, list) or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and "content" in m
            for m in released
        ):
            raise ValueError("the transformed messages are not a list of messages")
        instructions: str | None = None
        start = 0
        if self.has_instructions and released and released[0]["role"] == "system":
            content = released[0]["content"]
            if content is not None and not isinstance(content, str):
                raise ValueError("the transformed system instructions are not text")
            instructions, start = content, 1
        items: list[Any] = []
        for n in range(start, len(released)):
            message = released[n]
            if n < len(self.wire) and message == self.wire[n] and self.groups[n]:
                items.extend(self.groups[n])
            else:
                items.extend(_items_of(message))
        return instructions, items


def _items_of(message: dict[str, Any]) -> list[Any]:
    """The input items a (transformed) message stands for."""
    role, content = message["role"], message["content"]
    if role == "tool":
        if not isinstance(message.get("tool_call_id"), str):
            raise ValueError("a transformed tool message has no tool_call_id")
        output = content if isinstance(content, str | list) else json.dumps(content)
        return [
            {"type": "function_call_output", "call_id": message["tool_call_id"], "output": output}
        ]
    if role in MESSAGE_ROLES:
        items: list[Any] = []
        if content is not None and not isinstance(content, str | list):
            raise ValueError(f"a transformed {role} message's content is not text")
        if content or role != "assistant":
            items.append({"role": role, "content": content if content is not None else ""})
        if role == "assistant":
            for call in map(_checked_call, message.get("tool_calls") or []):
                item = {"type": "function_call", "call_id": call["id"], "name": call["name"]}
                items.append({**item, "arguments": json.dumps(call["args"])})
        return items
    if isinstance(content, dict) and content.get("type") == role:
        return [content]
    raise ValueError(f"a transformed message has an unknown role {role!r}")


def _checked_call(call: Any) -> dict[str, Any]:
    if not (
        isinstance(call, dict)
        and isinstance(call.get("id"), str)
        and isinstance(call.get("name"), str)
        and isinstance(call.get("args"), dict)
    ):
        raise ValueError("a transformed tool call is not {id, name, args}")
    return call


async def post_model_call(session: Session, model_id: str, output: list[Any]) -> list[Any] | None:
    """``post_model_call`` for the model's output items: ``None`` when the policies left the
    answer as it is, else the output items as they left it; raises ``ModelCallBlocked`` on a
    deny (the answer never reaches the SDK)."""
    content = _answer_text(output)
    calls = [_call(plain) for plain in map(_plain, output) if _kind(plain) == "function_call"]
    ctx = session.context(
        "post_model_call",
        model_id=model_id,
        content=content,
        tool_calls=copy.deepcopy(calls),
        finish_reason="tool_calls" if calls else "stop",
    )
    try:
        await session.emit(ctx)
    except InterceptionBlocked as blocked:
        raise _stopped(session, blocked_reason(blocked)) from None
    released = ctx["response"]
    if released["content"] == content and released["tool_calls"] == calls:
        return None
    try:
        return _rewritten(output, content, calls, released)
    except ValueError as exc:
        reason = {"point": "post_model_call", "reason": "transform", "message": str(exc)}
        raise _stopped(session, reason) from None


def _rewritten(
    output: list[Any], content: Any, calls: list[dict[str, Any]], released: dict[str, Any]
) -> list[Any]:
    """The output items for the released answer: the model's messages replaced by one with the
    released text, its function calls by the released ones (an unchanged call keeps its item,
    the calls go last); other items (reasoning) stay."""
    new_text = released["content"]
    new_calls = _call_items(output, calls, released["tool_calls"])
    dropped = {"message"} if new_text != content else set()
    if new_calls is not None:
        dropped.add("function_call")
    out = [item for item in output if _kind(_plain(item)) not in dropped]
    if "message" in dropped and new_text is not None:
        kinds = [_kind(_plain(item)) for item in out]
        at = kinds.index("function_call") if "function_call" in kinds else len(out)
        out.insert(at, _message(output, new_text))
    return out + (new_calls or [])


def _message(output: list[Any], text: Any) -> ResponseOutputMessage:
    first: dict[str, Any] = next((_plain(i) for i in output if _kind(_plain(i)) == "message"), {})
    return ResponseOutputMessage(
        type="message",
        id=str(first.get("id") or "msg-governed"),
        role="assistant",
        status="completed",
        content=[
            ResponseOutputText(
                type="output_text",
                text=text if isinstance(text, str) else json.dumps(text),
                annotations=[],
            )
        ],
    )


def _call_items(output: list[Any], calls: list[dict[str, Any]], released: Any) -> list[Any] | None:
    """The function call items for the released calls; ``None`` when they are the model's."""
    if released == calls:
        return None
    if not isinstance(released, list):
        raise ValueError("the transformed tool calls are not a list")
    originals = {
        plain.get("call_id"): (item, _call(plain))
        for item, plain in ((i, _plain(i)) for i in output)
        if _kind(plain) == "function_call"
    }
    items: list[Any] = []
    for call in map(_checked_call, released):
        found = originals.get(call["id"])
        if found is not None and found[1] == call:
            items.append(found[0])
            continue
        items.append(
            ResponseFunctionToolCall(
                type="function_call",
                id=getattr(found[0], "id", None) if found is not None else None,
                call_id=call["id"],
                name=call["name"],
                arguments=json.dumps(call["args"]),
                status="completed",
            )
        )
    return items


def _plain(value: Any) -> Any:
    """``value`` as JSON (the SDK's items are dicts or pydantic models)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _kind(plain: Any) -> str | None:
    kind = plain.get("type") if isinstance(plain, dict) else None
    return kind if isinstance(kind, str) else None


def _call(plain: dict[str, Any]) -> dict[str, Any]:
    """A function call as the contract's ``tool_calls`` carry it."""
    try:
        args = json.loads(plain.get("arguments") or "{}")
    except (TypeError, ValueError):
        args = {}
    return {
        "id": str(plain.get("call_id")),
        "name": str(plain.get("name")),
        "args": args if isinstance(args, dict) else {},
    }


def _text(content: Any) -> Any:
    """A message's content: its text when every part is text, else the parts as they are."""
    if not isinstance(content, list):
        return content
    texts: list[str] = []
    for part in content:
        if isinstance(part, dict) and part.get("type") in TEXT_PARTS:
            texts.append(str(part.get("text", "")))
        elif isinstance(part, dict) and part.get("type") == "refusal":
            texts.append(str(part.get("refusal", "")))
        else:
            return content
    return "".join(texts)


def _answer_text(output: list[Any]) -> str | None:
    """The text of the answer's messages; ``None`` when it has none."""
    texts = [
        _text(plain.get("content")) for plain in map(_plain, output) if _kind(plain) == "message"
    ]
    if not texts:
        return None
    return "".join(t if isinstance(t, str) else json.dumps(t) for t in texts)
