"""What a governed graph needs from its host: a checkpointer and the engine's ports, plus
whatever a host gives its own graphs beyond them (``extras``, e.g. the examples' side-effect
log)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, TypeVar, cast

from langgraph.checkpoint.base import BaseCheckpointSaver

from approvals.ports import ApprovalRequests, NewRequest, ToolLedger
from graphs.hooks.approval import ApprovalSlot, StoredDecisionResolver
from graphs.hooks.withheld import earlier_withheld
from graphs.tool_call.tools import ToolCatalog

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Extra(Generic[T]):
    """The typed key of something a host gives its graphs beyond the engine's ports; the
    module that defines the key defines what it holds (``graphs.examples.effects.EFFECTS``)."""

    name: str


@dataclass(frozen=True, kw_only=True, slots=True)
class GraphDeps:
    checkpointer: BaseCheckpointSaver[str]
    requests: ApprovalRequests
    ledger: ToolLedger
    request_ttl: timedelta = timedelta(hours=24)
    catalog: ToolCatalog = field(default_factory=ToolCatalog)
    #: Where a liftable deny gets its human answer; by default the decision stored for the
    #: request (recorded when first asked). Hosts with another approval path replace it.
    slots: Callable[[NewRequest], ApprovalSlot] | None = None
    #: Who is asked whether a call whose outcome is unknown took effect.
    reconcile_group: str = "operators"
    reconcile_ttl: timedelta = timedelta(days=30)
    #: What the host gives its own graphs beyond the engine's ports, by ``Extra`` name.
    extras: Mapping[str, object] = field(default_factory=dict)

    def provided(self, key: Extra[T]) -> T:
        """What the host gave for ``key``; ``LookupError`` when it gave nothing."""
        try:
            return cast(T, self.extras[key.name])
        except KeyError:
            raise LookupError(f"this host gives its graphs no {key.name!r}") from None

    def slot(self, new: NewRequest) -> ApprovalSlot:
        if self.slots is not None:
            return self.slots(new)
        return StoredDecisionResolver(self.requests, new, self.earlier_withheld)

    async def earlier_withheld(self, new: NewRequest) -> list[Any]:
        """The values ``new``'s run withheld from approvers in its earlier requests, which
        ``new`` must mask too (``graphs.hooks.withheld``)."""
        return await earlier_withheld(self.requests, self.checkpointer, new.run_id, new.thread_id)
