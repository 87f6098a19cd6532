"""LangChain tools as the tool seam sees them: what the model may set, validated, and one run.

A LangChain tool's ``tool_call_schema`` is what the model is shown: the arguments it may set,
without the injected ones (``InjectedState``, ``InjectedToolCallId``, ``InjectedStore``,
``ToolRuntime``), which LangGraph's ``ToolNode`` fills in when the tool runs. That schema is
what a governed call is validated against, shown to approvers, bound by the call's identity
and checked on an edit; the injected values never are (they are the run's, not the call's).

A tool whose ``args_schema`` is a JSON-schema document (what MCP adapters produce) gets a
pydantic model that checks that document with ``jsonschema`` and keeps the arguments as given.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

import jsonschema
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, model_validator

from graphs.tool_call.tools import GovernedTool, ToolCall

#: Runs the tool with the arguments a governed call settled on (already validated).
ToolRunner = Callable[[dict[str, Any], ToolCall], Awaitable[Any]]


class JsonSchemaArgs(BaseModel):
    """Arguments checked against a JSON-schema document (``_schema``) instead of fields."""

    model_config = ConfigDict(extra="allow")

    @model_validator(mode="before")
    @classmethod
    def _conforms(cls, data: Any) -> Any:
        document = cls.__dict__.get("__json_document__", {})
        validator = jsonschema.validators.validator_for(document)(document)
        errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        if errors:
            # Raised in a validator, pydantic reports it as a ValidationError: what the tool
            # seam turns into ``invalid_arguments`` and the edit form into a field error.
            raise ValueError(
                "; ".join(
                    f"{'/'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}"
                    for e in errors[:10]
                )
            )
        if not isinstance(data, dict):
            raise ValueError("arguments must be an object")
        return data

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        document: dict[str, Any] = cls.__dict__.get("__json_document__", {})
        return document


def json_schema_model(name: str, document: dict[str, Any]) -> type[BaseModel]:
    """A model whose validation is ``document`` (checked now: a broken schema fails here, at
    registration, not after someone approved a call)."""
    jsonschema.validators.validator_for(document).check_schema(document)
    model = type(f"{name}_args", (JsonSchemaArgs,), {"__json_document__": dict(document)})
    return cast(type[BaseModel], model)


def args_model_of(tool: BaseTool) -> type[BaseModel]:
    """The model the model-visible arguments of ``tool`` are validated with."""
    schema = tool.tool_call_schema
    if isinstance(schema, dict):
        return json_schema_model(tool.name, schema)
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema
    raise TypeError(
        f"tool {tool.name!r}: its argument schema is {type(schema).__name__}, "
        "neither a pydantic model nor a JSON-schema object"
    )


def injected_arguments(tool: BaseTool) -> list[str]:
    """The arguments of ``tool`` the model does not set (LangGraph injects them)."""
    full, shown = tool.args_schema, tool.tool_call_schema
    if not (isinstance(full, type) and issubclass(full, BaseModel)):
        return []
    visible = (
        set(shown.model_fields)
        if isinstance(shown, type) and issubclass(shown, BaseModel)
        else set()
    )
    return sorted(name for name in full.model_fields if name not in visible)


def governed_view(
    tool: BaseTool,
    run: ToolRunner,
    *,
    sensitive: bool,
    args_model: type[BaseModel] | None = None,
    description: str | None = None,
) -> GovernedTool:
    """``tool`` as a ``GovernedTool`` whose execution is ``run`` (given the arguments as JSON,
    which the identity binds)."""

    async def call_fn(args: BaseModel, call: ToolCall) -> Any:
        return await run(args.model_dump(mode="json"), call)

    return GovernedTool(
        name=tool.name,
        description=description or tool.description or tool.name,
        args_model=args_model or args_model_of(tool),
        fn=call_fn,
        sensitive=sensitive,
    )


def from_langchain(tool: BaseTool, *, sensitive: bool = False) -> GovernedTool:
    """Govern an existing LangChain tool. Its ``args_schema`` is a pydantic model or a
    JSON-schema document (MCP tools); the idempotency key reaches it as
    ``config["metadata"]["idempotency_key"]``. A tool with injected arguments
    (``InjectedState``, ``InjectedToolCallId``, ``ToolRuntime``, ...) is refused here: only
    LangGraph's ``ToolNode`` fills them in, so use it with ``graphs.ApprovalMiddleware``."""
    injected = injected_arguments(tool)
    if injected:
        # Refused now: the call would otherwise fail for the missing values after a human
        # approved it.
        raise TypeError(
            f"tool {tool.name!r} takes injected arguments ({', '.join(injected)}), which only "
            "a ToolNode fills in: give it to a create_agent agent with graphs.ApprovalMiddleware"
        )
    schema = args_model_of(tool)

    async def call_fn(args: BaseModel, call: ToolCall) -> Any:
        return await tool.ainvoke(
            args.model_dump(mode="json"),
            config={"metadata": {"idempotency_key": call.idempotency_key, "run_id": call.run_id}},
        )

    return GovernedTool(
        name=tool.name,
        description=tool.description,
        args_model=schema,
        fn=call_fn,
        sensitive=sensitive,
    )
