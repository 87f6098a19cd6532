"""Notifications: one delivery per (request, channel, escalation level) and a log of attempts.

Revision ID: 0007
Revises: 0006
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        -- Owned by the expiry revision (0006); added here too, IF NOT EXISTS, so notifications
        -- can key on it whichever of the two lands first. Escalation bumps it.
        ALTER TABLE approval_requests
            ADD COLUMN IF NOT EXISTS escalation_level integer NOT NULL DEFAULT 0;

        -- One row per notification that should be sent. The unique key is what makes a
        -- notification go out once across workers: the worker whose insert wins sends it.
        -- status 'sending' holds a lease until next_attempt_at; a worker that dies mid-send
        -- leaves it to be claimed again after that (so a crash may resend, never lose).
        CREATE TABLE notification_deliveries (
            id bigserial PRIMARY KEY,
            request_id uuid NOT NULL REFERENCES approval_requests (id),
            channel text NOT NULL,
            event text NOT NULL CHECK (event IN ('waiting', 'escalated')),
            escalation_level integer NOT NULL,
            status text NOT NULL
                CHECK (status IN ('sending', 'retry', 'sent', 'failed', 'skipped', 'cancelled')),
            attempts integer NOT NULL DEFAULT 0,
            next_attempt_at timestamptz NOT NULL DEFAULT now(),
            last_error text,
            created_at timestamptz NOT NULL DEFAULT now(),
            finished_at timestamptz,
            UNIQUE (request_id, channel, escalation_level)
        );
        -- The notifier's poll for due retries and expired leases reads only live rows.
        CREATE INDEX notification_deliveries_due_idx
            ON notification_deliveries (next_attempt_at) WHERE status IN ('sending', 'retry');

        -- Every attempt, whatever came of it: the delivery log operators read.
        CREATE TABLE notification_attempts (
            id bigserial PRIMARY KEY,
            delivery_id bigint NOT NULL REFERENCES notification_deliveries (id),
            attempt integer NOT NULL,
            status text NOT NULL CHECK (status IN ('sent', 'retry', 'failed', 'skipped')),
            -- The HTTP status, or the SMTP reply code, when the receiver answered.
            response_code integer,
            error text,
            at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX notification_attempts_delivery_idx
            ON notification_attempts (delivery_id, attempt);
        """
    )


def downgrade() -> None:
    # escalation_level stays: it belongs to the expiry revision.
    op.execute(
        """
        DROP TABLE notification_attempts;
        DROP TABLE notification_deliveries;
        """
    )
