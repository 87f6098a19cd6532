"""A run's settlement no longer deadlocks with a decision on one of its requests.

``approvals_settle_step_v1`` locked the run's row FOR UPDATE, then wrote the interrupt id of each
request the run waits on. A decision locks its request's row first, then inserts its decision
and resume job, whose foreign keys take a key-share lock on the run's row: FOR UPDATE conflicts
with key share, so a decision arriving while its run's step ended made the two wait for each
other, and PostgreSQL failed one of them (``deadlock detected``; a 503 under load).

``approvals_settle_step_v2`` is the same settlement with the run's row locked FOR NO KEY
UPDATE, which a foreign key check does not wait for and which still serializes with a cancel
(an UPDATE of the run takes the same lock). The engine's statements call v2; v1 stays beside it
for processes of the previous release still running during a rolling upgrade.

Revision ID: 0023
Revises: 0022
"""

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE FUNCTION approvals_settle_step_v2(
            p_run_id uuid, p_records jsonb, p_status text, p_error text, p_answer text,
            p_request_ids uuid[], p_interrupt_ids text[]
        ) RETURNS text LANGUAGE plpgsql AS $fn$
        DECLARE
            run_status text;
            outcome text := 'recorded';
        BEGIN
            INSERT INTO interception_records
                (run_id, session_id, sequence, point, decision, reason, interceptor, mode,
                 input_identity, enforced_identity, resolved_by, record)
            SELECT p_run_id, x.session_id, x.sequence, x.point, x.decision, x.reason,
                   x.interceptor, x.mode, x.input_identity, x.enforced_identity,
                   x.resolved_by, x.record
              FROM jsonb_to_recordset(COALESCE(p_records, '[]'::jsonb)) AS x(
                   session_id text, sequence bigint, point text, decision text, reason text,
                   interceptor text, mode text, input_identity text, enforced_identity text,
                   resolved_by text, record jsonb);

            IF p_status IS NOT NULL THEN
                -- NO KEY UPDATE, not UPDATE: a decision on one of the run's requests holds that
                -- request's row and then inserts rows referencing the run, whose foreign key
                -- checks take a key-share lock on this row. FOR UPDATE made them wait for
                -- each other (a deadlock); NO KEY UPDATE still serializes with a cancel.
                SELECT status INTO run_status FROM runs WHERE id = p_run_id FOR NO KEY UPDATE;
                IF run_status = 'cancelled' AND p_status <> 'cancelled' THEN
                    outcome := 'refused';
                ELSE
                    outcome := 'settled';
                    UPDATE approval_requests r
                       SET interrupt_id = b.interrupt_id
                      FROM unnest(p_request_ids, p_interrupt_ids) AS b(request_id, interrupt_id)
                     WHERE r.id = b.request_id
                       AND r.interrupt_id IS DISTINCT FROM b.interrupt_id;
                    UPDATE runs
                       SET status = p_status, error = p_error,
                           answer = COALESCE(p_answer, answer), updated_at = now()
                     WHERE id = p_run_id;
                END IF;
            END IF;

            INSERT INTO audit_events (kind, run_id, data)
            SELECT 'policy.' || x.decision, p_run_id,
                   jsonb_build_object('point', x.point, 'reason', x.reason,
                                      'interceptor', x.interceptor, 'mode', x.mode,
                                      'sequence', x.sequence, 'session_id', x.session_id,
                                      'input_identity', x.input_identity,
                                      'enforced_identity', x.enforced_identity,
                                      'resolved_by', x.resolved_by)
              FROM jsonb_to_recordset(COALESCE(p_records, '[]'::jsonb)) AS x(
                   session_id text, sequence bigint, point text, decision text, reason text,
                   interceptor text, mode text, input_identity text, enforced_identity text,
                   resolved_by text, record jsonb)
             WHERE x.decision IN ('deny', 'transform')
             ORDER BY x.sequence;

            IF outcome = 'settled' THEN
                INSERT INTO audit_events (kind, run_id, data)
                VALUES ('run.' || p_status, p_run_id,
                        jsonb_build_object('error', left(p_error, 500)));
            ELSIF outcome = 'refused' THEN
                INSERT INTO audit_events (kind, run_id, data)
                VALUES ('run.settle_refused', p_run_id,
                        jsonb_build_object('status', p_status, 'run_status', run_status,
                                           'error', left(p_error, 500)));
            END IF;
            RETURN outcome;
        END
        $fn$;
        """
    )


def downgrade() -> None:
    op.execute(
        "DROP FUNCTION approvals_settle_step_v2(uuid, jsonb, text, text, text, uuid[], text[])"
    )
