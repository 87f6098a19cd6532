"""Governance: interception records, blocked runs, approver groups and edit permission.

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE runs DROP CONSTRAINT runs_status_check;
        ALTER TABLE runs ADD CONSTRAINT runs_status_check
            CHECK (status IN ('running', 'waiting', 'completed', 'blocked', 'failed'));

        ALTER TABLE approval_requests
            ADD COLUMN approvers text[] NOT NULL DEFAULT '{}',
            ADD COLUMN allow_edit boolean NOT NULL DEFAULT true;

        -- One row per interception (AGENT-HOOKS-0.1 §10.3): payload-free, so the decision, the
        -- reason and the identities, never the arguments or results themselves.
        CREATE TABLE interception_records (
            id bigserial PRIMARY KEY,
            run_id uuid NOT NULL REFERENCES runs (id),
            session_id text NOT NULL,
            sequence bigint NOT NULL,
            point text NOT NULL,
            decision text NOT NULL,
            reason text,
            interceptor text,
            mode text NOT NULL,
            input_identity text,
            enforced_identity text,
            resolved_by text,
            record jsonb NOT NULL,
            at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX interception_records_run_idx ON interception_records (run_id, sequence);
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TABLE interception_records;
        ALTER TABLE approval_requests DROP COLUMN approvers, DROP COLUMN allow_edit;
        ALTER TABLE runs DROP CONSTRAINT runs_status_check;
        ALTER TABLE runs ADD CONSTRAINT runs_status_check
            CHECK (status IN ('running', 'waiting', 'completed', 'failed'));
        """
    )
