"""Governed tools: a callable with an argument schema, a sensitivity mark and one execution.

A tool function receives its validated arguments and a ``ToolCall`` that says which run and call
it serves and carries the idempotency key to pass to the external system, when it takes one.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, get_type_hints

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, ConfigDict, create_model

from graphs.tool_call.call import Condition, ToolCall

__all__ = ["GOVERNED_KEY", "GovernedTool", "ToolCall", "ToolCatalog", "ToolFn", "governed_tool"]


@functools.cache
def _schema_of(model: type[BaseModel]) -> dict[str, Any]:
    # Building a JSON schema costs about a millisecond; a model's schema never changes.
    return model.model_json_schema()


ToolFn = Callable[[BaseModel, ToolCall], Awaitable[Any]]

#: Where ``GovernedTool.as_tool`` keeps the governed tool in the LangChain tool's metadata.
GOVERNED_KEY = "approvals_governed_tool"


@dataclass(frozen=True, kw_only=True, slots=True)
class GovernedTool:
    """A tool the governed loop may call, with the validation it carries.

    ``sensitive`` tools pause for a human decision. ``preconditions`` are checked before anyone
    is asked (a failure is an error naming the rule, for the model to explain); ``postconditions``
    after the tool ran (a failure is recorded and reported). ``risk``, ``estimated_cost`` and
    ``approver_group`` describe the tool to policies and approvers.
    """

    name: str
    description: str
    args_model: type[BaseModel]
    fn: ToolFn
    sensitive: bool = False
    preconditions: tuple[Condition, ...] = ()
    postconditions: tuple[Condition, ...] = ()
    risk: str | None = None
    estimated_cost: float | None = None
    approver_group: str | None = None

    def describe(self) -> dict[str, Any]:
        """The tool and its validation, as a listing shows it."""
        return {
            "name": self.name,
            "description": self.description,
            "sensitive": self.sensitive,
            "arguments": self.args_schema(),
            "preconditions": [c.to_json() for c in self.preconditions],
            "postconditions": [c.to_json() for c in self.postconditions],
            "risk": self.risk,
            "estimated_cost": self.estimated_cost,
            "approver_group": self.approver_group,
        }

    def describe_for_policy(self) -> dict[str, Any]:
        """The metadata policies see (``tool`` in a condition), beside the tool's name."""
        return {
            "sensitive": self.sensitive,
            "risk": self.risk,
            "estimated_cost": self.estimated_cost,
            "approver_group": self.approver_group,
        }

    def args_schema(self) -> dict[str, Any]:
        """The JSON schema approvers' edits are validated against."""
        return _schema_of(self.args_model)

    def validate(self, args: Any) -> BaseModel:
        """Parse arguments; raises ``pydantic.ValidationError``."""
        return self.args_model.model_validate(args)

    def as_tool(self) -> BaseTool:
        """This tool as a LangChain tool, for a ``create_agent`` agent with
        ``graphs.ApprovalMiddleware`` or a ``graphs.GovernedToolNode``: they run it through
        the tool step as it is (its validation, conditions and ``ToolCall``). Anything else
        that runs it gets an error: it never runs ungoverned."""
        name = self.name

        async def ungoverned(**kwargs: Any) -> Any:
            raise RuntimeError(
                f"{name} is a governed tool: it runs only under graphs.ApprovalMiddleware or "
                "in a graphs.GovernedToolNode"
            )

        return StructuredTool(
            name=self.name,
            description=self.description,
            args_schema=self.args_model,
            coroutine=ungoverned,
            metadata={GOVERNED_KEY: self},
        )

    def spec(self) -> dict[str, Any]:
        """An OpenAI-style function description, for binding to a chat model."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.args_schema(),
            },
        }


class ToolCatalog:
    """The governed tools of each graph built in this process: what listings (and agents) read
    to know which tools exist and what validation each carries."""

    def __init__(self) -> None:
        self._by_graph: dict[str, tuple[GovernedTool, ...]] = {}
        self._governance: dict[str, Any] = {}
        #: The graph name of the latest registration (what a registry entry just built).
        self.last_registered: str | None = None

    def register(
        self, graph: str, tools: Sequence[GovernedTool], governance: Any | None = None
    ) -> None:
        """Record ``graph``'s tools and, where it has one, the governance its calls go through
        (what an approver's edit is checked against)."""
        self._by_graph[graph] = tuple(tools)
        if governance is not None:
            self._governance[graph] = governance
        self.last_registered = graph

    def alias(self, name: str, graph: str) -> None:
        """Make ``name`` (a registry entry) find what ``graph`` (the agent it built) holds."""
        self._by_graph[name] = self._by_graph.get(graph, ())
        if graph in self._governance:
            self._governance[name] = self._governance[graph]

    def for_graph(self, graph: str) -> tuple[GovernedTool, ...]:
        return self._by_graph.get(graph, ())

    def governance_of(self, graph: str) -> Any | None:
        return self._governance.get(graph)


def governed_tool(
    *,
    name: str | None = None,
    sensitive: bool = False,
    preconditions: Sequence[Condition] = (),
    postconditions: Sequence[Condition] = (),
    risk: str | None = None,
    estimated_cost: float | None = None,
    approver_group: str | None = None,
) -> Callable[[Callable[..., Awaitable[Any]]], GovernedTool]:
    """Declare a tool from an async function ``fn(call: ToolCall, **args)``; the argument
    schema comes from the type hints of the keyword arguments, the description from the
    docstring. See ``GovernedTool`` for the rest."""

    def wrap(fn: Callable[..., Awaitable[Any]]) -> GovernedTool:
        if not inspect.iscoroutinefunction(fn):
            # Refused here, when the tool is declared: awaited after a human approved the
            # call, a plain function's result would fail the call that was just approved.
            raise TypeError(
                f"{getattr(fn, '__name__', fn)!r}: a governed tool is an async function "
                "(`async def`); run blocking work in it with asyncio.to_thread"
            )
        hints = get_type_hints(fn)
        params = list(inspect.signature(fn).parameters.values())
        if not params or hints.get(params[0].name) is not ToolCall:
            raise TypeError(f"{fn.__name__}: the first parameter must be `call: ToolCall`")
        fields: dict[str, Any] = {}
        for p in params[1:]:
            default = ... if p.default is inspect.Parameter.empty else p.default
            fields[p.name] = (hints.get(p.name, Any), default)
        tool_name = name or fn.__name__
        model = create_model(
            f"{tool_name}_args",
            __config__=ConfigDict(extra="forbid"),
            **fields,
        )

        async def call_fn(args: BaseModel, call: ToolCall) -> Any:
            return await fn(call, **dict(args))

        return GovernedTool(
            name=tool_name,
            description=inspect.getdoc(fn) or tool_name,
            args_model=model,
            fn=call_fn,
            sensitive=sensitive,
            preconditions=tuple(preconditions),
            postconditions=tuple(postconditions),
            risk=risk,
            estimated_cost=estimated_cost,
            approver_group=approver_group,
        )

    return wrap
