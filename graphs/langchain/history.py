"""A run's message history as the engine reads it, shared by the engine's own loop
(``graphs.hosts.langgraph.agent``) and ``ApprovalMiddleware``'s seams: messages to and from the
contract's wire shape, what ran in this run, and the calls a turn may not run for their id."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage


def to_wire(message: BaseMessage) -> dict[str, Any]:
    """A message as the contract's ``messages`` carry it."""
    role = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}.get(
        message.type, message.type
    )
    out: dict[str, Any] = {"role": role, "content": message.content}
    if isinstance(message, AIMessage) and message.tool_calls:
        out["tool_calls"] = [
            {"id": tc["id"], "name": tc["name"], "args": tc["args"]} for tc in message.tool_calls
        ]
    if isinstance(message, ToolMessage):
        out["tool_call_id"] = message.tool_call_id
    return out


def from_wire(wire: Any) -> list[BaseMessage]:
    """Messages rebuilt from a transformed ``messages`` target; raises ``ValueError`` when the
    transform left something that is not a message list."""
    if not isinstance(wire, list):
        raise ValueError("transformed messages are not a list")
    out: list[BaseMessage] = []
    for item in wire:
        if not isinstance(item, dict) or "content" not in item:
            raise ValueError("a transformed message is not an object with content")
        role, content = item.get("role"), item["content"]
        if role == "user":
            out.append(HumanMessage(content=content))
        elif role == "system":
            out.append(SystemMessage(content=content))
        elif role == "assistant":
            out.append(AIMessage(content=content, tool_calls=item.get("tool_calls") or []))
        elif role == "tool":
            out.append(ToolMessage(content=content, tool_call_id=str(item.get("tool_call_id"))))
        else:
            raise ValueError(f"a transformed message has an unknown role {role!r}")
    return out


def tool_counts(messages: Sequence[BaseMessage]) -> dict[str, int]:
    """How many times each tool ran successfully in this run: since the run's user message
    (a thread may hold earlier runs)."""
    counts: dict[str, int] = {}
    for m in reversed(messages):
        if isinstance(m, HumanMessage):
            break
        if isinstance(m, ToolMessage) and m.status != "error" and m.name:
            counts[m.name] = counts.get(m.name, 0) + 1
    return counts


def call_counts(ran: Mapping[str, int], turn: AIMessage, call_id: str) -> dict[str, int]:
    """``run.tool_count`` as one call of ``turn`` sees it: what ran before the turn, plus the
    turn's calls before this one, which run first or beside it. Counted from what ran alone,
    five e-mails in one turn each saw the count before the turn, and "at most three a run" let
    all five through."""
    counts = dict(ran)
    for tc in turn.tool_calls:
        if str(tc["id"]) == call_id:
            break
        counts[tc["name"]] = counts.get(tc["name"], 0) + 1
    return counts


def refusals(messages: Sequence[BaseMessage], turn: AIMessage) -> dict[str, dict[str, Any]]:
    """The calls of ``turn`` (the latest model turn) refused for their id, each with the error
    its one result carries.

    A call id names one call of one run: the execution ledger keeps one execution per (run,
    call id), approval requests are keyed by it, and the model pairs each result with its call
    by it. So a call whose id an earlier turn of this run already used (``call_id_reused``)
    never runs: running it would either replay the earlier call's result or pair a second
    effect with the first one's record. A turn that proposes the same id twice
    (``duplicate_call_id``) is refused whole, one error per distinct id: which result would
    belong to which of the twins is undecidable, and a partial turn would run calls the model
    planned together with the refused ones. Refused calls reach no interceptor and no human."""
    earlier: set[str] = set()
    for m in reversed(messages):
        if isinstance(m, HumanMessage):
            break
        if isinstance(m, AIMessage) and m is not turn:
            earlier.update(str(tc["id"]) for tc in m.tool_calls)
    ids = [str(tc["id"]) for tc in turn.tool_calls]
    twins = sorted({i for i in ids if ids.count(i) > 1})
    refused: dict[str, dict[str, Any]] = {}
    for call_id in dict.fromkeys(ids):
        if call_id in earlier:
            refused[call_id] = {
                "code": "call_id_reused",
                "call_id": call_id,
                "message": f"call id {call_id!r} was already used by an earlier call of this "
                "run; this call did not run. Propose it again with a new id.",
            }
        elif twins:
            refused[call_id] = {
                "code": "duplicate_call_id",
                "call_ids": twins,
                "message": "this turn proposed more than one call with the id(s) "
                f"{', '.join(repr(t) for t in twins)}; no call of this turn ran. Propose the "
                "calls again, each with its own id.",
            }
    return refused
