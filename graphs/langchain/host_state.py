"""The agent state ``ApprovalMiddleware`` adds (``graphs.langchain.middleware``) and the runner's
input admission for a ``create_agent`` host, in that state's terms."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NotRequired

from langchain.agents.middleware.types import AgentState
from langchain_core.messages import BaseMessage
from langgraph.channels.base import BaseChannel
from langgraph.pregel import Pregel

from graphs.hooks.governance import SessionHolder
from graphs.run.admission import Admission, InputGate

log = logging.getLogger(__name__)

#: The agent state keys the middleware adds: what must survive a pause (an input waiting for a
#: human) and why a run was stopped. The run's identity is never here (see ``EngineRun``).
NEW_INPUT = "approvals_new_input"
BLOCKED = "approvals_blocked"


class ApprovalState(AgentState[Any]):
    #: The user message is still to be governed by ``input`` (it waits for a human: only a
    #: graph node can pause); set by the runner's admission.
    approvals_new_input: NotRequired[bool]
    #: Why the run stopped, when a policy denied its input, a model call or its answer.
    approvals_blocked: NotRequired[dict[str, Any] | None]


@dataclass(frozen=True, kw_only=True, slots=True)
class HostInputGate(InputGate):
    """The runner's input admission for a ``create_agent`` host: the same emissions as for a
    ``build_agent`` graph, handed to the agent in its own state's terms."""

    #: The agent is a node of another graph, whose state cannot carry an input waiting for a
    #: human to the agent: such an input stops the run instead of reaching the agent unread.
    nested: bool = False

    async def admit(
        self, holder: SessionHolder, *, run_id: str, principal: str, message: str
    ) -> Admission:
        admission = await InputGate.admit(
            self, holder, run_id=run_id, principal=principal, message=message
        )
        if admission.state is None:
            return admission
        state = admission.state
        # A nested agent's (or a tool node's) graph cannot pause for its input: the runner
        # holds the message until a human decides it (graphs.run.admission).
        held = self.nested and bool(state.get("new_input"))
        return dataclasses.replace(
            admission,
            state=self.state_for(state["messages"], new_input=bool(state.get("new_input"))),
            held=held,
        )

    def state_for(self, messages: list[Any], *, new_input: bool = False) -> dict[str, Any]:
        """The agent's input state for an admitted message, in its own state's terms."""
        return {"messages": messages, NEW_INPUT: new_input and not self.nested, BLOCKED: None}


def input_fields(graph: Pregel[Any, Any, Any, Any]) -> tuple[str, ...]:
    """The keys of the graph's input a run may set beside its message: the agent's own state
    (a ``state_schema``'s fields), never the engine's.

    Read as LangGraph reads an input (the channels of its input schema, found from the type
    hints), not from the graph's JSON schema: pydantic cannot build that for a state declared
    with ``typing.TypedDict`` on Python < 3.12 (it asks for ``typing_extensions.TypedDict``),
    though LangGraph runs such a graph."""
    engine = {"messages", NEW_INPUT, BLOCKED}
    builder = getattr(graph, "builder", None)
    schemas = getattr(builder, "schemas", None)
    input_schema = getattr(builder, "input_schema", None)
    if isinstance(schemas, Mapping) and isinstance(schemas.get(input_schema), Mapping):
        keys = [k for k, v in schemas[input_schema].items() if isinstance(v, BaseChannel)]
    else:
        try:
            keys = list(graph.get_input_jsonschema().get("properties") or {})
        except Exception as exc:  # a schema nothing can describe: only the message is taken
            log.warning(
                "graph %s: its input schema cannot be read (%s: %s), so a run takes only its "
                "message",
                graph.get_name(),
                type(exc).__name__,
                exc,
            )
            return ()
    return tuple(sorted(k for k in keys if isinstance(k, str) and k not in engine))


def messages_of(state: Any) -> list[BaseMessage]:
    messages = state.get("messages") if isinstance(state, Mapping) else None
    if not isinstance(messages, list):
        return []
    return [m for m in messages if isinstance(m, BaseMessage)]
