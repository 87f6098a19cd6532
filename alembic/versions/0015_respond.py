"""Respond: a human's answer returned as the tool's result, where a tool allows it.

A request records which decisions its approvers may make (``allowed_decisions``, the
HumanInTheLoopMiddleware vocabulary); a ``respond`` decision consumes it as ``answered``: the
tool never runs and the model receives the answer (kept in the decision's ``reason``).

Revision ID: 0015
Revises: 0014
"""

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE approval_requests
            ADD COLUMN allowed_decisions text[] NOT NULL
                DEFAULT ARRAY['approve', 'edit', 'reject']::text[]
                CHECK (cardinality(allowed_decisions) > 0
                       AND allowed_decisions <@ ARRAY['approve', 'edit', 'reject', 'respond']);

        ALTER TABLE approval_requests DROP CONSTRAINT approval_requests_status_check;
        ALTER TABLE approval_requests ADD CONSTRAINT approval_requests_status_check
            CHECK (status IN ('pending', 'approved', 'rejected', 'answered', 'expired',
                              'superseded', 'cancelled'));

        ALTER TABLE decisions DROP CONSTRAINT decisions_kind_check;
        ALTER TABLE decisions ADD CONSTRAINT decisions_kind_check
            CHECK (kind IN ('approve', 'reject', 'edit', 'respond'));
        -- An answer is what the model receives in place of the tool's result: never empty.
        ALTER TABLE decisions ADD CONSTRAINT decisions_respond_has_answer
            CHECK (kind <> 'respond' OR length(btrim(reason)) > 0);
        """
    )


def downgrade() -> None:
    op.execute(
        """
        -- The earlier constraints cannot hold answers: they read as rejections (the tool did
        -- not run; the audit log still says what was answered).
        ALTER TABLE decisions DROP CONSTRAINT decisions_respond_has_answer;
        ALTER TABLE decisions DROP CONSTRAINT decisions_kind_check;
        UPDATE decisions SET kind = 'reject' WHERE kind = 'respond';
        ALTER TABLE decisions ADD CONSTRAINT decisions_kind_check
            CHECK (kind IN ('approve', 'reject', 'edit'));

        ALTER TABLE approval_requests DROP CONSTRAINT approval_requests_status_check;
        UPDATE approval_requests SET status = 'rejected' WHERE status = 'answered';
        ALTER TABLE approval_requests ADD CONSTRAINT approval_requests_status_check
            CHECK (status IN ('pending', 'approved', 'rejected', 'expired', 'superseded',
                              'cancelled'));

        ALTER TABLE approval_requests DROP COLUMN allowed_decisions;
        """
    )
