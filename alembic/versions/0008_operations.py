"""Operations: cancelled runs, and the pending requests a cancellation closes.

A cancelled run is final: a trigger keeps it cancelled, so a step that was already under way
when an operator cancelled cannot settle it back to waiting or completed.

Revision ID: 0008
Revises: 0007
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE runs DROP CONSTRAINT runs_status_check;
        ALTER TABLE runs ADD CONSTRAINT runs_status_check
            CHECK (status IN ('running', 'waiting', 'completed', 'blocked', 'failed',
                              'cancelled'));

        ALTER TABLE approval_requests DROP CONSTRAINT approval_requests_status_check;
        ALTER TABLE approval_requests ADD CONSTRAINT approval_requests_status_check
            CHECK (status IN ('pending', 'approved', 'rejected', 'expired', 'superseded',
                              'cancelled'));

        -- Any later write of a cancelled run's status is dropped: the run stays as the operator
        -- left it, whatever a resume that was already running settles.
        CREATE FUNCTION approvals_keep_cancelled() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            RETURN NULL;
        END;
        $fn$;
        CREATE TRIGGER runs_cancelled_is_final
            BEFORE UPDATE OF status ON runs
            FOR EACH ROW
            WHEN (OLD.status = 'cancelled' AND NEW.status IS DISTINCT FROM 'cancelled')
            EXECUTE FUNCTION approvals_keep_cancelled();
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TRIGGER runs_cancelled_is_final ON runs;
        DROP FUNCTION approvals_keep_cancelled;
        -- The earlier constraints cannot hold cancelled rows: they read as failed runs and
        -- superseded requests (the audit log still says they were cancelled).
        UPDATE runs SET status = 'failed' WHERE status = 'cancelled';
        UPDATE approval_requests SET status = 'superseded' WHERE status = 'cancelled';
        ALTER TABLE approval_requests DROP CONSTRAINT approval_requests_status_check;
        ALTER TABLE approval_requests ADD CONSTRAINT approval_requests_status_check
            CHECK (status IN ('pending', 'approved', 'rejected', 'expired', 'superseded'));
        ALTER TABLE runs DROP CONSTRAINT runs_status_check;
        ALTER TABLE runs ADD CONSTRAINT runs_status_check
            CHECK (status IN ('running', 'waiting', 'completed', 'blocked', 'failed'));
        """
    )
