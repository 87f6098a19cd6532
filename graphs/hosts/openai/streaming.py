"""An OpenAI-SDK step's progress as run events: what a run's stream (``GET /api/v1/runs/{id}/
events``, ``approvals runs start --stream``) shows, in the shape the LangGraph host gives.

Each tool call the agent makes is one event, named by the agent that made it:
``{"messages": [{"content": "", "tool_calls": [name]}]}``; the final answer is one event once
``output`` released it, as released. Never a call's arguments (which the caller may not be
allowed to see, or see only redacted), nor a tool's result, nor text deltas: a model's text is
sent once the engine's points allowed it, as the LangGraph host does.

When someone follows the step as it runs (``observe``), the step runs with
``Runner.run_streamed`` and each call is published as the SDK makes it; otherwise with
``Runner.run``, and the calls are taken from the step's new items when it ends. Either way the
step's settlement writes the same events.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from agents import Agent, RunResultStreaming
from agents import Runner as SDKRunner
from agents.items import ToolCallItem
from agents.stream_events import RunItemStreamEvent

from graphs.run.step_events import Publish, StepUpdates


class Published:
    """The events of one step: kept for its settlement, and handed to ``observe`` as they
    happen."""

    def __init__(self, observe: Publish | None, made: frozenset[str] = frozenset()) -> None:
        self.observe = observe
        self._events: list[tuple[str, dict[str, Any]]] = []
        #: The calls the step's state (a resume's) already made: not news to its followers.
        self._made = made

    @property
    def events(self) -> StepUpdates:
        return tuple(self._events)

    async def __call__(self, node: str, data: dict[str, Any]) -> None:
        self._events.append((node, data))
        if self.observe is not None:
            await self.observe(node, data)

    async def call(self, item: Any) -> None:
        """The event of a tool call the step made (none for one its state had made)."""
        update = item_update(item)
        if update is not None and _call_id(item.raw_item) not in self._made:
            await self(*update)

    async def items(self, items: Iterable[Any]) -> None:
        """An event for each tool call among a finished step's ``items`` (a resumed state's
        result holds the calls made before the pause too)."""
        for item in items:
            await self.call(item)

    async def answer(self, agent: Any, answer: str | None) -> None:
        """The final answer, as ``output`` released it."""
        if answer is None:
            return
        node = agent.name if isinstance(agent, Agent) else "agent"
        await self(node, {"messages": [{"content": answer, "tool_calls": []}]})


def item_update(item: Any) -> tuple[str, dict[str, Any]] | None:
    """The event of a run item: a tool call's name, by the agent that made it."""
    if not isinstance(item, ToolCallItem):
        return None
    raw = item.raw_item
    name = raw.get("name") if isinstance(raw, dict) else getattr(raw, "name", None)
    if not isinstance(name, str):
        name = getattr(raw, "type", None) or "tool"
    node = item.agent.name if isinstance(item.agent, Agent) else "agent"
    return node, {"messages": [{"content": "", "tool_calls": [name]}]}


async def run_streamed(
    agent: Agent[Any], given: Any, published: Published, **options: Any
) -> RunResultStreaming:
    """``Runner.run_streamed(agent, given, **options)`` to its end, each tool call published
    as it is made; the finished result (which raises what the run raised)."""
    result = SDKRunner.run_streamed(agent, given, **options)
    async for event in result.stream_events():
        if isinstance(event, RunItemStreamEvent) and event.name == "tool_called":
            await published.call(event.item)
    return result


def _call_id(raw: Any) -> Any:
    return raw.get("call_id") if isinstance(raw, dict) else getattr(raw, "call_id", None)


def calls_made(state: Mapping[str, Any]) -> frozenset[str]:
    """The call ids of the tool calls a stored ``RunState`` (its JSON, as stored) holds."""
    items = state.get("generated_items") or []
    return frozenset(
        str(raw["call_id"])
        for item in items
        if isinstance(item, dict)
        and item.get("type") == "tool_call_item"
        and isinstance(raw := item.get("raw_item"), dict)
        and "call_id" in raw
    )
