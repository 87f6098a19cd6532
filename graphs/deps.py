"""What a governed graph needs from its host: a checkpointer and the engine's ports."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from langgraph.checkpoint.base import BaseCheckpointSaver

from approvals.ports import ApprovalRequests, SideEffectLog, ToolLedger
from graphs.tools import ToolCatalog


@dataclass(frozen=True, kw_only=True, slots=True)
class GraphDeps:
    checkpointer: BaseCheckpointSaver[str]
    requests: ApprovalRequests
    ledger: ToolLedger
    effects: SideEffectLog
    request_ttl: timedelta = timedelta(hours=24)
    catalog: ToolCatalog = field(default_factory=ToolCatalog)
