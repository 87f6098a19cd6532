"""Expiry and escalation chains: what a request does when its deadline passes.

Revision ID: 0006
Revises: 0005
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE approval_requests
            -- reject: expired with reason "expired" and the run resumed; escalate: handed to
            -- the next step of escalation_chain (rejected once the chain is spent).
            ADD COLUMN on_expiry text NOT NULL DEFAULT 'reject'
                CHECK (on_expiry IN ('reject', 'escalate')),
            -- The steps still to come: [{"approvers": [...], "expires_in_seconds": n}, ...].
            ADD COLUMN escalation_chain jsonb NOT NULL DEFAULT '[]'::jsonb
                CHECK (jsonb_typeof(escalation_chain) = 'array'),
            -- How many times the request was escalated; notifiers compare it with what they
            -- last announced.
            ADD COLUMN escalation_level integer NOT NULL DEFAULT 0
                CHECK (escalation_level >= 0);

        -- The sweeper's one query when nothing is due: the pending requests by deadline.
        CREATE INDEX approval_requests_pending_deadline_idx
            ON approval_requests (expires_at) WHERE status = 'pending';
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP INDEX approval_requests_pending_deadline_idx;
        ALTER TABLE approval_requests
            DROP COLUMN escalation_level,
            DROP COLUMN escalation_chain,
            DROP COLUMN on_expiry;
        """
    )
