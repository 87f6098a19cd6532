"""Edits re-checked by the policy, and shown copies checked against their digest.

- ``proposed_by``: a request created for arguments an approver edited names that approver; the
  edit needed other or more approvers, so the editor may not decide it (it never runs on the
  editor's authority alone).
- ``shown_digest``: jcs-sha256 over what the approver is shown (run, call, tool and the shown
  copy). The copy is checked against it before it is displayed and before a decision is
  accepted, so a row edited behind the engine's back is refused instead of shown.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import hashlib
import json

import sqlalchemy as sa
from agent_hooks import canonical_json

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def _digest(row: sa.Row[tuple[object, ...]]) -> str:
    # The same scheme as approvals.identity.shown_digest, spelled out so that this revision
    # keeps meaning what it meant when it was written.
    shown = row.shown if isinstance(row.shown, dict) else json.loads(str(row.shown))
    value = {"run_id": str(row.run_id), "call_id": row.call_id, "tool": row.tool, "shown": shown}
    return "jcs-sha256:" + hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE approval_requests ADD COLUMN proposed_by text;
        ALTER TABLE approval_requests ADD COLUMN shown_digest text;
        """
    )
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT id, run_id, call_id, tool, shown FROM approval_requests"))
    for row in rows.fetchall():
        conn.execute(
            sa.text("UPDATE approval_requests SET shown_digest = :d WHERE id = :id"),
            {"d": _digest(row), "id": row.id},
        )
    op.execute("ALTER TABLE approval_requests ALTER COLUMN shown_digest SET NOT NULL")


def downgrade() -> None:
    op.execute(
        """
        ALTER TABLE approval_requests DROP COLUMN shown_digest;
        ALTER TABLE approval_requests DROP COLUMN proposed_by;
        """
    )
