"""What a governed graph needs from its host: a checkpointer and the engine's ports."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from langgraph.checkpoint.base import BaseCheckpointSaver

from approvals.ports import ApprovalRequests, NewRequest, SideEffectLog, ToolLedger
from graphs.governance import ApprovalSlot
from graphs.resolver import StoredDecisionResolver
from graphs.tools import ToolCatalog


@dataclass(frozen=True, kw_only=True, slots=True)
class GraphDeps:
    checkpointer: BaseCheckpointSaver[str]
    requests: ApprovalRequests
    ledger: ToolLedger
    effects: SideEffectLog
    request_ttl: timedelta = timedelta(hours=24)
    catalog: ToolCatalog = field(default_factory=ToolCatalog)
    #: Where a liftable deny gets its human answer; by default the decision stored for the
    #: request (recorded when first asked). Hosts with another approval path replace it.
    slots: Callable[[NewRequest], ApprovalSlot] | None = None
    #: Who is asked whether a call whose outcome is unknown took effect.
    reconcile_group: str = "operators"
    reconcile_ttl: timedelta = timedelta(days=30)

    def slot(self, new: NewRequest) -> ApprovalSlot:
        if self.slots is not None:
            return self.slots(new)
        return StoredDecisionResolver(self.requests, new)
