"""Quorum: a request may need several distinct approvers; their votes until it is decided.

Revision ID: 0004
Revises: 0003
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE approval_requests
            ADD COLUMN quorum smallint NOT NULL DEFAULT 1 CHECK (quorum BETWEEN 1 AND 20);

        -- One approval per principal per request, until the request's quorum is met (then the
        -- last vote's decide consumes the request, in the same transaction).
        CREATE TABLE approval_votes (
            request_id uuid NOT NULL REFERENCES approval_requests (id),
            principal text NOT NULL,
            at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (request_id, principal)
        );
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TABLE approval_votes;
        ALTER TABLE approval_requests DROP COLUMN quorum;
        """
    )
