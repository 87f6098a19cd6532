"""Retention deletes a long-finished run's own rows, so the deletes must stay cheap.

Deleting a parent row makes PostgreSQL look for rows that still reference it; without an index
on the referencing column that is a sequential scan of the child table per deleted row, and
pruning N runs costs N scans of the job queue and of the decisions. Three indexes give those
lookups (and retention's own deletes) an index: ``resume_queue (run_id)``,
``resume_queue (request_id)`` and ``decisions (run_id)``.

``approvals_run_in_flight_v1(run_id)`` says whether something of a run is still moving: a
request pending, a resume queued (or being resumed: a claimed job stays ``queued`` until its
step settles), a notification being sent under a live lease. Retention keeps such a run's rows
(its thread's checkpoints still go) and takes them on a later pass; its dry run and its delete
ask the same function, so they cannot disagree.

Revision ID: 0022
Revises: 0021
"""

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE INDEX resume_queue_run_idx ON resume_queue (run_id);
        CREATE INDEX resume_queue_request_idx ON resume_queue (request_id);
        CREATE INDEX decisions_run_idx ON decisions (run_id);

        CREATE FUNCTION approvals_run_in_flight_v1(p_run_id uuid) RETURNS boolean
            LANGUAGE sql STABLE AS $fn$
            SELECT EXISTS (SELECT 1 FROM approval_requests a
                            WHERE a.run_id = p_run_id AND a.status = 'pending')
                OR EXISTS (SELECT 1 FROM resume_queue q
                            WHERE q.run_id = p_run_id AND q.status = 'queued')
                OR EXISTS (SELECT 1 FROM approval_requests a
                             JOIN notification_deliveries d ON d.request_id = a.id
                            WHERE a.run_id = p_run_id AND d.status = 'sending'
                              AND d.next_attempt_at > now())
                OR EXISTS (SELECT 1 FROM run_events e
                             JOIN run_notification_deliveries d ON d.event_id = e.id
                            WHERE e.run_id = p_run_id AND d.status = 'sending'
                              AND d.next_attempt_at > now())
        $fn$;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP FUNCTION approvals_run_in_flight_v1(uuid);
        DROP INDEX decisions_run_idx;
        DROP INDEX resume_queue_request_idx;
        DROP INDEX resume_queue_run_idx;
        """
    )
