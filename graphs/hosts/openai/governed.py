"""An OpenAI Agents SDK agent under governance: its function tools ask the engine.

``GovernedAgent`` governs every function tool of the agent, and of the agents it reaches through
``Agent.as_tool()`` and handoffs, in place:

- ``needs_approval`` becomes the engine's question: the call's ``pre_tool_call`` is emitted
  through the run's governance (its policy files, and the tool's own ``needs_approval``, bool
  or function, as an escalation). An escalation records the approval request (the resolver of
  the LangGraph host, keyed by run, call id and content identity) and answers ``True``: the SDK
  pauses the run with the call in its ``interruptions``.
- ``on_invoke_tool`` asks again before the call runs, and the answer comes from the database
  (the decision stored for this exact call), not from the ``RunState``: a state that says
  "approved" without a stored approval runs nothing. An allowed call runs once, through the
  execution ledger (idempotency key from run and call id; a crash mid-call is
  ``outcome_unknown`` and never retried).

The agent's model (an ``agents.Model``) is governed in place too (``model_calls.GovernedModel``):
its calls go through ``pre_model_call`` and ``post_model_call``. A model named by a string is
made by the run's ``ModelProvider``, governed by ``model_calls.governed_run_config``.

Edits are refused for these tools (the SDK has no edit decision): their requests offer approve
and reject only. ``always_approve`` is never used.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agent_hooks import Verdict
from agents import Agent, FunctionTool
from agents.models.interface import Model

from approvals.policy import check_policies_tool_names
from graphs.hooks.governance import Governance
from graphs.hosts.openai.calls import GovernedInvoke, govern_tool
from graphs.hosts.openai.mcp import govern_mcp
from graphs.hosts.openai.model_calls import GovernedModel


@dataclass(frozen=True)
class OpenAIAgent:
    """What a registry entry names to register an ``agents.Agent`` with its own governance
    (policy files); a bare ``agents.Agent`` is governed by its tools' ``needs_approval``."""

    agent: Agent[Any]
    governance: Governance | None = None
    max_turns: int = 10
    #: The user's run (``graphs.hosts.openai.run_config.UserRun`` checks and uses these):
    #: ``context``, a function of the run input's ``"context"`` JSON object that returns the
    #: object tools see as ``ctx.context`` (called again at each resume, never pickled);
    #: ``run_config``, an ``agents.RunConfig`` or a function that returns one; ``hooks``, an
    #: ``agents.RunHooks`` or a function that returns one; ``session``, ``"postgres"`` (the
    #: thread's SDK session, kept by the engine) or a function of the thread id that returns
    #: the user's own SDK session.
    context: Any = None
    run_config: Any = None
    hooks: Any = None
    session: Any = None


class NeedsApproval:
    """At ``pre_tool_call``, a call whose tool's ``needs_approval`` said yes is a liftable
    deny (escalate), as ``EscalateSensitiveTools`` does for a sensitive governed tool."""

    def intercept(self, context: dict[str, Any], /) -> Verdict:
        if context.get("interception_point") != "pre_tool_call":
            return Verdict.allow()
        tool = ((context.get("extensions") or {}).get("approvals") or {}).get("tool") or {}
        if tool.get("needs_approval") is True:
            name = context.get("tool_call", {}).get("name")
            return Verdict.escalate(reason="needs_approval", message=f"{name} needs approval")
        return Verdict.allow()


class UngovernedAgent(ValueError):
    """An agent that could call something the engine cannot ask a human about."""


class GovernedAgent:
    """A registered OpenAI-SDK agent: the agent (its tools governed), its governance; its
    runs are run by ``graphs.hosts.openai.host.OpenAIHost``.

    Only function tools can be governed (the engine runs them); an agent that reaches any
    other tool (hosted tools run inside the model's response, shell and computer tools
    outside ``on_invoke_tool``) or an MCP server (its tools are made per run) is refused with
    ``UngovernedAgent``, as a graph with no approval boundary is."""

    def __init__(self, name: str, found: Agent[Any] | OpenAIAgent) -> None:
        given = found if isinstance(found, OpenAIAgent) else OpenAIAgent(found)
        self.name = name
        self.agent: Agent[Any] = given.agent
        self.max_turns = given.max_turns
        self.governance = _with_needs_approval(given.governance)
        agents = list(reachable(self.agent))
        for agent in agents:
            _refuse_ungoverned(agent)
        check_policies_tool_names(
            self.governance.interceptors,
            (t.name for agent in agents for t in agent.tools if isinstance(t, FunctionTool)),
            graph=name,
        )
        for agent in agents:
            for tool in agent.tools:
                if isinstance(tool, FunctionTool) and not isinstance(
                    tool.on_invoke_tool, GovernedInvoke
                ):
                    govern_tool(tool)
            # Its MCP servers' tools, governed each time the SDK makes them (mcp).
            govern_mcp(agent)
            if isinstance(agent.model, Model) and not isinstance(agent.model, GovernedModel):
                # Its model calls through pre_model_call and post_model_call (model_calls);
                # a model named by a string is governed by the run's model provider.
                agent.model = GovernedModel(agent.model)

    def describe_tools(self) -> list[dict[str, Any]]:
        """Every function tool the agent reaches, as ``approvals tools list`` shows a
        governed tool: name, description, argument schema, whether it needs approval."""
        described: list[dict[str, Any]] = []
        for agent in reachable(self.agent):
            for tool in agent.tools:
                if not isinstance(tool, FunctionTool):
                    continue
                invoke = tool.on_invoke_tool
                own = invoke.needs if isinstance(invoke, GovernedInvoke) else tool.needs_approval
                needs = "always" if own is True else "never" if own is False else "per call"
                described.append(
                    {
                        "name": tool.name,
                        "description": tool.description,
                        "sensitive": own is True,
                        "needs_approval": needs,
                        "agent": agent.name,
                        "nested_agent": bool(getattr(tool, "_is_agent_tool", False)),
                        "arguments": tool.params_json_schema,
                        "preconditions": [],
                        "postconditions": [],
                        "risk": None,
                        "estimated_cost": None,
                        "approver_group": None,
                    }
                )
        return described


def _refuse_ungoverned(agent: Agent[Any]) -> None:
    others = [
        f"{getattr(t, 'name', '?')} ({type(t).__name__})"
        for t in agent.tools
        if not isinstance(t, FunctionTool)
    ]
    if others:
        raise UngovernedAgent(
            f"agent {agent.name!r} has tools the engine cannot govern: {', '.join(others)}; "
            "only function tools run under approval (wrap the action in a @function_tool)"
        )


def _with_needs_approval(governance: Governance | None) -> Governance:
    """The run's governance: the given interceptors (policies) first, so that their approval
    blocks (approver groups, deadlines) shape a request they escalate, then ``NeedsApproval``."""
    if governance is None:
        return Governance(interceptors=[NeedsApproval()], names=["needs_approval"])
    if governance.emitter is not None:
        return governance
    names = list(governance.names) or [
        f"{type(i).__name__}#{n}" for n, i in enumerate(governance.interceptors)
    ]
    return Governance(
        interceptors=[*governance.interceptors, NeedsApproval()],
        mode=governance.mode,
        composition=governance.composition,
        timeout=governance.timeout,
        identity_provider=governance.identity_provider,
        names=[*names, "needs_approval"],
    )


def reachable(root: Agent[Any]) -> Iterator[Agent[Any]]:
    """``root`` and every agent it reaches through ``as_tool()`` tools and handoffs."""
    seen: set[int] = set()
    stack: list[Any] = [root]
    while stack:
        agent = stack.pop()
        if not isinstance(agent, Agent) or id(agent) in seen:
            continue
        seen.add(id(agent))
        yield agent
        for tool in agent.tools:
            nested = getattr(tool, "_agent_instance", None)
            if nested is not None:
                stack.append(nested)
        for handoff in agent.handoffs:
            if isinstance(handoff, Agent):
                stack.append(handoff)
            else:
                # A ``handoff(agent)`` keeps its target by weak reference.
                ref = getattr(handoff, "_agent_ref", None)
                stack.append(ref() if callable(ref) else None)
