"""A run event for a resume that failed and left its run as it was: ``resume_failed``.

A decision's job writes ``resuming`` (its trigger on ``resume_queue``), and a stream of the run
that had closed at ``waiting`` reconnects to follow the step. When that resume fails without
settling the run (a graph's bug, a refused state), the run keeps its status, so no ``status``
event came and the stream sent keepalives for ever. The job's close now records
``resume_failed`` (the run still waits; an operator may retry it), at which a stream closes.
Not a ``status`` event: those also notify the run's subscribers, and the run's status did not
change.

Revision ID: 0026
Revises: 0025
"""

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE run_events DROP CONSTRAINT run_events_kind_check;
        ALTER TABLE run_events ADD CONSTRAINT run_events_kind_check
            CHECK (kind IN ('status', 'resuming', 'update', 'resume_failed'));
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DELETE FROM run_events WHERE kind = 'resume_failed';
        ALTER TABLE run_events DROP CONSTRAINT run_events_kind_check;
        ALTER TABLE run_events ADD CONSTRAINT run_events_kind_check
            CHECK (kind IN ('status', 'resuming', 'update'));
        """
    )
