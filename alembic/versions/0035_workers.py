"""The workers that are alive, and which graphs each serves: a worker writes its row when it
starts and every few seconds after (``storage.workers``), and deletes it when it stops. A
queued resume job whose run's graph no live worker serves can then be named (``approvals
status``, the ``approvals_resume_jobs_unserved`` metric) instead of waiting unexplained, with
only a worker's log line (``unknown graph 'crm'``) to say why.

Revision ID: 0035
Revises: 0034
"""

from alembic import op

revision = "0035"
down_revision = "0034"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE workers (
            id text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
            host text NOT NULL,
            pid integer NOT NULL,
            graphs text[] NOT NULL,
            config_digest text NOT NULL,
            started_at timestamptz NOT NULL DEFAULT now(),
            seen_at timestamptz NOT NULL DEFAULT now()
        );
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE workers")
