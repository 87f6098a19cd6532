"""Content identity: what binds a decision to the exact call an approver saw.

``jcs-sha256``: SHA-256 over the RFC 8785 canonical JSON of the shown context (run, call id,
tool, arguments), the same scheme AGENT-HOOKS-0.1 uses for its context identities.
"""

from __future__ import annotations

import hashlib
from typing import Any

from agent_hooks import canonical_json

SCHEME = "jcs-sha256"


def jcs_sha256(value: Any) -> str:
    """``jcs-sha256:<hex>`` of any JSON value (the canonical form is computed by the
    agent-hooks core, the same code that computes the contract's context identities)."""
    digest = hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()
    return f"{SCHEME}:{digest}"


def call_identity(*, run_id: str, call_id: str, tool: str, args: dict[str, Any]) -> str:
    """The identity of one tool call as shown to an approver."""
    return jcs_sha256({"run_id": run_id, "call_id": call_id, "tool": tool, "args": args})


def shown_digest(*, run_id: str, call_id: str, tool: str, shown: dict[str, Any]) -> str:
    """The digest of everything an approver is shown for one request (arguments, description,
    the rule that escalated it, redaction markers), checked before it is displayed or decided."""
    return jcs_sha256({"run_id": run_id, "call_id": call_id, "tool": tool, "shown": shown})


def idempotency_key(*, run_id: str, call_id: str) -> str:
    """A stable key for the one execution a (run, call) may have; tools pass it downstream."""
    return hashlib.sha256(f"approvals:{run_id}:{call_id}".encode()).hexdigest()[:32]
