"""``input_fields`` reads a graph's own input keys as LangGraph reads an input, so a state
declared with ``typing.TypedDict`` (which pydantic cannot describe on Python < 3.12) keeps
them; the engine's keys and LangGraph's managed values are never among them."""

from __future__ import annotations

import typing
from typing import Annotated, Any

import typing_extensions
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.managed import RemainingSteps
from langgraph.pregel import Pregel

from graphs import GovernedToolNode
from graphs.langchain.host_state import input_fields


@tool
def look(word: str) -> str:
    """Look a word up."""
    return word


class Inner(typing.TypedDict):
    tier: str


class PlainState(typing.TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    customer_tier: str
    customer: typing_extensions.NotRequired[Inner]
    remaining_steps: RemainingSteps


class ExtState(typing_extensions.TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    customer_tier: str
    remaining_steps: RemainingSteps


def _graph(schema: type[Any]) -> Pregel[Any, Any, Any, Any]:
    builder = StateGraph(schema)
    builder.add_node("model", lambda state: {"messages": [AIMessage(content="hi")]})
    builder.add_node("tools", GovernedToolNode([look]))
    builder.add_edge(START, "model")
    return builder.compile()


def test_a_typing_typeddict_states_own_keys_are_its_input_fields() -> None:
    assert input_fields(_graph(PlainState)) == ("customer", "customer_tier")


def test_a_typing_extensions_typeddict_state_gives_the_same_fields() -> None:
    assert input_fields(_graph(ExtState)) == ("customer_tier",)
